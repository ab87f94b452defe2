/**
 * Where `dsh run` takes its prompt from: the arguments, or `--prompt-file FILE` (`-` for
 * standard input) for prompts too large for a command line (the kernel caps arguments
 * at a few hundred KB in total; a file or a pipe has no such limit).
 */
import { readFile } from 'node:fs/promises'
import { errorMessage } from '@dsh/base'
import { UsageError } from './errors.js'

export async function readPrompt(options: { positionals: string[]; promptFile?: string; stdin?: NodeJS.ReadableStream }): Promise<string> {
  const fromArgs = options.positionals.join(' ').trim()
  if (options.promptFile === undefined) {
    if (!fromArgs) throw new UsageError('USAGE', 'dsh run: a PROMPT is required (or --prompt-file FILE, - for standard input)')
    return fromArgs
  }
  if (fromArgs) throw new UsageError('USAGE', 'dsh run: give the prompt either as arguments or with --prompt-file, not both')
  const text = options.promptFile === '-' ? await readAll(options.stdin ?? process.stdin) : await readPromptFile(options.promptFile)
  if (!text.trim()) throw new UsageError('USAGE', `dsh run: the prompt in ${options.promptFile === '-' ? 'standard input' : options.promptFile} is empty`)
  return text
}

async function readPromptFile(file: string): Promise<string> {
  try {
    return await readFile(file, 'utf8')
  } catch (error) {
    throw new UsageError('USAGE', `dsh run: cannot read --prompt-file ${file}: ${errorMessage(error)}`)
  }
}

async function readAll(stream: NodeJS.ReadableStream): Promise<string> {
  const chunks: Buffer[] = []
  for await (const chunk of stream) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk)
  // Decoded once at the end: a multi-byte character split across chunks stays whole.
  return Buffer.concat(chunks).toString('utf8')
}
