/**
 * A real Redis server for tests: `redis-server` started on a Unix socket in a fresh
 * temporary directory (Redis cannot be given port 0, and a socket needs no port at all),
 * with nothing else listening. `stop` kills it and removes the directory. A machine
 * without `redis-server` fails the test that asks, naming the package: the test command's
 * preflight (`scripts/preflight.mjs`) is what installs it.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { createConnection } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

export interface RedisServer {
  /** The socket's path: what `DSH_REDIS_URL`-style variables hold (`unix:///…/redis.sock`). */
  readonly url: string
  readonly socket: string
  readonly process: ChildProcess
  /** What the server printed, for a failing test's message. */
  log(): string
  /** Kill the server (SIGKILL unless `graceful`) and, unless `keepData`, remove its directory. */
  stop(options?: { graceful?: boolean; keepData?: boolean }): Promise<void>
  /** Start it again on the same socket and data directory (its append-only file, when it has one). */
  restart(): Promise<void>
}

export interface RedisOptions {
  /** Keep an append-only file, so a restarted server has every job it had. */
  appendOnly?: boolean
}

const STARTUP_MS = 10_000

export async function startRedis(options: RedisOptions = {}): Promise<RedisServer> {
  const dir = mkdtempSync(join(tmpdir(), 'dsh-redis-'))
  const socket = join(dir, 'redis.sock')
  let output = ''
  let child: ChildProcess
  const launch = async () => {
    const args = ['--port', '0', '--unixsocket', socket, '--unixsocketperm', '700', '--dir', dir, '--save', '', '--appendonly', options.appendOnly ? 'yes' : 'no', '--appendfsync', 'always', '--daemonize', 'no']
    child = spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] })
    child.stdout!.on('data', (chunk: Buffer) => (output += chunk))
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk))
    const failed = new Promise<never>((_, reject) => {
      child.once('error', (error: NodeJS.ErrnoException) =>
        reject(new Error(error.code === 'ENOENT' ? 'redis-server is not installed: install the Debian package redis-server (npm test does so in its preflight, scripts/preflight.mjs)' : `redis-server could not start: ${error.message}`)),
      )
      child.once('exit', (code) => reject(new Error(`redis-server exited ${code} before it was ready:\n${output}`)))
    })
    await Promise.race([waitForPing(socket), failed])
  }
  await launch()
  const exited = () => new Promise<void>((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve() : child.once('exit', () => resolve())))
  return {
    url: `unix://${socket}`,
    socket,
    get process() {
      return child
    },
    log: () => output,
    stop: async ({ graceful = false, keepData = false } = {}) => {
      child.kill(graceful ? 'SIGTERM' : 'SIGKILL')
      await exited()
      if (!keepData) rmSync(dir, { recursive: true, force: true })
    },
    restart: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGKILL')
        await exited()
      }
      await launch()
    },
  }
}

/** Until the socket answers PING with PONG (or the start-up time is over). */
async function waitForPing(socket: string): Promise<void> {
  const deadline = Date.now() + STARTUP_MS
  while (Date.now() < deadline) {
    if (existsSync(socket) && (await ping(socket))) return
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  throw new Error(`redis-server did not answer on ${socket} within ${STARTUP_MS} ms`)
}

function ping(socket: string): Promise<boolean> {
  return new Promise((resolve) => {
    const connection = createConnection(socket)
    let reply = ''
    connection.on('data', (chunk) => {
      reply += chunk
      if (reply.includes('\r\n')) {
        connection.destroy()
        resolve(reply.startsWith('+PONG'))
      }
    })
    connection.on('error', () => resolve(false))
    connection.on('connect', () => connection.write('PING\r\n'))
  })
}
