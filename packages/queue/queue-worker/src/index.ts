export { serveQueue, WORKER_NAME, type QueueJobEvent, type QueueWorker } from './worker.js'
