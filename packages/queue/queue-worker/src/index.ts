export { serveQueue, WORKER_NAME, type QueueWorker, type QueueWorkerOptions } from './worker.js'
