export { serveQueue, WORKER_NAME, type QueueJobAbout, type QueueJobEvent, type QueueWorker, type QueueWorkerOptions } from './worker.js'
