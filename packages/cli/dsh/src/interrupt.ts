/**
 * SIGINT/SIGTERM for a command that stops gracefully: the first signal asks it to stop
 * (it exits once its work is gone); a second exits at once. Returns the uninstaller.
 */
export function onInterrupt(stop: () => void): () => void {
  let signals = 0
  const onSignal = () => {
    if (++signals > 1) process.exit(130)
    stop()
  }
  process.on('SIGINT', onSignal)
  process.on('SIGTERM', onSignal)
  return () => {
    process.off('SIGINT', onSignal)
    process.off('SIGTERM', onSignal)
  }
}
