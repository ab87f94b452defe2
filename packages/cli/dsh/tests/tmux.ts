/**
 * A tmux server of one test file's own (`tmux -L NAME`), kept up from its first use to
 * `stop()` by an idle session. With the default server shared by every file, and a server
 * that exits when its last session is killed, one file's clean-up could stop the server just
 * as another file (or this file's next test) started a session: "server exited unexpectedly".
 */
import { execFileSync } from 'node:child_process'

export function tmuxServer(name: string): { tmux: (...args: string[]) => string; stop: () => void } {
  let kept = false
  const tmux = (...args: string[]): string => {
    if (!kept) {
      kept = true
      execFileSync('tmux', ['-L', name, 'new-session', '-d', '-s', 'keeper', 'sleep 86400'])
    }
    return execFileSync('tmux', ['-L', name, ...args], { encoding: 'utf8' })
  }
  const stop = (): void => {
    if (!kept) return
    try {
      execFileSync('tmux', ['-L', name, 'kill-server'], { stdio: 'ignore' })
    } catch {
      // already gone
    }
  }
  return { tmux, stop }
}
