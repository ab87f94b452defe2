// A reviewer helper over three files, one at a time (so the record's order is fixed),
// its structured verdicts collected into a summary.
const files = ['notes/a.md', 'notes/b.md', 'notes/c.md']
const schema = { type: 'object', properties: { verdict: { type: 'string' }, notes: { type: 'string' } }, required: ['verdict', 'notes'] }

export default async ({ agent, parallel }) => {
  const reviews = await parallel(files, (file) => agent('reviewer', `Review ${file}`, { schema, label: file }), { concurrency: 1 })
  return files.map((file, index) => `${file}: ${reviews[index].structured.verdict} (${reviews[index].structured.notes})`).join('\n')
}
