/**
 * A yes-or-no question on the terminal, for `dsh workspaces` verbs that throw changes away.
 * Asked only when a person is there (standard input a terminal, and an output to show the
 * question on); anything but `y` or `yes`, Ctrl-C or the input closing is no.
 */
import { createInterface } from 'node:readline'

export interface ConfirmTerminal {
  input: NodeJS.ReadStream
  output: NodeJS.WriteStream
}

/** The terminal to ask on, or `undefined` when nobody is there to answer. */
export function promptTerminal(): ConfirmTerminal | undefined {
  if (process.stdin.isTTY !== true) return undefined
  const output = process.stdout.isTTY ? process.stdout : process.stderr.isTTY ? process.stderr : undefined
  return output === undefined ? undefined : { input: process.stdin, output }
}

export async function confirmOnTerminal(terminal: ConfirmTerminal, question: string): Promise<boolean> {
  const reader = createInterface({ input: terminal.input, output: terminal.output, terminal: true })
  try {
    return await new Promise<boolean>((resolve) => {
      reader.on('SIGINT', () => {
        terminal.output.write('\n')
        resolve(false)
      })
      reader.on('close', () => resolve(false))
      reader.question(question, (answer) => resolve(/^y(es)?$/i.test(answer.trim())))
    })
  } finally {
    reader.close()
  }
}
