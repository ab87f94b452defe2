/**
 * `dsh acp` as a real process, driven by the official SDK client with a chosen answer to
 * `session/request_permission`; and the raw pipe beside it for frames no SDK would send.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { readdirSync } from 'node:fs'
import type { ClientConnection, RequestPermissionRequest } from '@agentclientprotocol/sdk'
import { connectAcpClient, pickPermission, type PermissionAnswer } from '@dsh/testkit/acp'
import { dshBin, repoRoot, tempDir } from './cli.js'

export type { PermissionAnswer }

/** Picks the first option of `kind`, as an editor's "always reject" setting would. */
export const pick = pickPermission

export interface TrustServed {
  child: ChildProcess
  connection: ClientConnection
  /** Every permission request the client was asked, in order. */
  asked: RequestPermissionRequest[]
  stdout(): string
  stderr(): string
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
}

export const trustRunning: ChildProcess[] = []

export function killTrustRunning(): void {
  for (const child of trustRunning.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
}

export function spawnDshAcp(args: string[]): ChildProcess {
  const child = spawn(process.execPath, [dshBin, 'acp', ...args], {
    cwd: repoRoot,
    env: { ...process.env, DSH_HOME: tempDir('dsh-home-'), DEEPSEEK_API_KEY: '', OPENAI_API_KEY: '' },
    stdio: ['pipe', 'pipe', 'pipe'],
  })
  trustRunning.push(child)
  return child
}

export function serveTrusted(args: string[], answer: PermissionAnswer = pick('reject_once')): TrustServed {
  const child = spawnDshAcp(args)
  return { child, ...connectAcpClient(child, { name: 'acp-trust-test', answer }) }
}

/** The descriptors a process holds open right now (Linux). */
export function openDescriptors(pid: number): number {
  return readdirSync(`/proc/${pid}/fd`).length
}
