/**
 * Hosts for multi-host tests: network namespaces this test makes, joined by veth pairs
 * with addresses it assigns (`10.<net>.<link>.1` and `.2`, a /30 per link), and removed
 * again by `dispose`, with every process still inside them killed first. Nothing is
 * reached from the root namespace: processes run inside (`spawnIn`) and talk to each other.
 * Where namespaces cannot be made (not root, no `ip`), `namespaceProblem` says why, for the
 * test to report as skipped (the one kind of test allowed to skip).
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process'
import { randomBytes } from 'node:crypto'

function ip(...args: string[]): string {
  return execFileSync('ip', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })
}

/** Why namespaces cannot be made here, or undefined when a probe namespace could be made and removed. */
export function namespaceProblem(): string | undefined {
  const probe = `dsh-probe-${randomBytes(3).toString('hex')}`
  try {
    ip('netns', 'add', probe)
    ip('netns', 'del', probe)
    return undefined
  } catch (error) {
    return `network namespaces cannot be made here (ip netns add failed: ${(error as Error).message.split('\n')[0]}); run as root with iproute2 to exercise the multi-host test`
  }
}

export interface SpawnedIn {
  child: ChildProcess
  stdout(): string
  stderr(): string
  exited: Promise<number | null>
}

export class NetworkLab {
  private readonly suffix = randomBytes(3).toString('hex')
  private readonly made: string[] = []
  private readonly children: ChildProcess[] = []
  private links = 0

  /** `net` is the second octet of every address this lab assigns (pick one per test file). */
  constructor(private readonly net: number) {}

  /** A new namespace with its loopback up; its full name. */
  namespace(name: string): string {
    const full = `dsh-${name}-${this.suffix}`
    ip('netns', 'add', full)
    this.made.push(full)
    ip('netns', 'exec', full, 'ip', 'link', 'set', 'lo', 'up')
    return full
  }

  /** A veth pair between `a` and `b`; the addresses of `a`'s end and of `b`'s end. */
  link(a: string, b: string): { a: string; b: string } {
    const n = ++this.links
    const [ea, eb] = [`da${n}${this.suffix}`, `db${n}${this.suffix}`]
    ip('link', 'add', ea, 'type', 'veth', 'peer', 'name', eb)
    ip('link', 'set', ea, 'netns', a)
    ip('link', 'set', eb, 'netns', b)
    const [addrA, addrB] = [`10.${this.net}.${n}.1`, `10.${this.net}.${n}.2`]
    ip('-n', a, 'addr', 'add', `${addrA}/30`, 'dev', ea)
    ip('-n', b, 'addr', 'add', `${addrB}/30`, 'dev', eb)
    ip('-n', a, 'link', 'set', ea, 'up')
    ip('-n', b, 'link', 'set', eb, 'up')
    return { a: addrA, b: addrB }
  }

  /** A TCP port free in `ns`, chosen by the OS there (a server that cannot take port 0 itself, Redis, is started on it). */
  freePort(ns: string): number {
    const out = execFileSync('ip', ['netns', 'exec', ns, process.execPath, '-e', "const s=require('net').createServer().listen(0,'0.0.0.0',()=>{process.stdout.write(String(s.address().port));s.close()})"], { encoding: 'utf8' })
    return Number(out)
  }

  /** `command args` run inside `ns`; its stdin is a pipe the test may write to. */
  spawnIn(ns: string, command: string, args: string[], options: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): SpawnedIn {
    const child = spawn('ip', ['netns', 'exec', ns, command, ...args], { cwd: options.cwd, env: options.env ?? process.env, stdio: ['pipe', 'pipe', 'pipe'] })
    this.children.push(child)
    let stdout = ''
    let stderr = ''
    child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk))
    child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk))
    const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)))
    return { child, stdout: () => stdout, stderr: () => stderr, exited }
  }

  /** The processes inside `ns` now. */
  pidsIn(ns: string): number[] {
    return ip('netns', 'pids', ns).split('\n').filter(Boolean).map(Number)
  }

  /** Kill what is left in every namespace, then remove them (their veth ends go with them). */
  dispose(): void {
    for (const child of this.children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
    for (const ns of this.made.splice(0)) {
      try {
        for (const pid of this.pidsIn(ns)) process.kill(pid, 'SIGKILL')
      } catch {
        // Already gone: nothing to kill in it.
      }
      try {
        ip('netns', 'del', ns)
      } catch (error) {
        process.stderr.write(`network lab: could not remove namespace ${ns}: ${(error as Error).message}\n`)
      }
    }
  }
}
