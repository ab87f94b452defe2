/**
 * SIGINT/SIGTERM for a command that stops gracefully: the first signal asks it to stop
 * (`stop`: it exits once its work is gone); a second one calls `onSecond`, which exits at
 * once. Returns the uninstaller.
 */
export function onInterrupt(stop: (signal: NodeJS.Signals) => void, onSecond: (signal: NodeJS.Signals) => void): () => void {
  let signals = 0
  const onSignal = (signal: NodeJS.Signals) => {
    if (++signals > 1) onSecond(signal)
    else stop(signal)
  }
  process.on('SIGINT', onSignal)
  process.on('SIGTERM', onSignal)
  return () => {
    process.off('SIGINT', onSignal)
    process.off('SIGTERM', onSignal)
  }
}
