/** `dsh demo`: placeholder until every provider has landed. */
export async function demoVerb(_args: string[]): Promise<number> {
  process.stderr.write('dsh demo: not available yet\n')
  return 2
}
