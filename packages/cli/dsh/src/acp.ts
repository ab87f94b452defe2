/** `dsh acp`: placeholder until @dsh/acp-server lands. */
export async function acpVerb(_args: string[]): Promise<number> {
  process.stderr.write('dsh acp: not available yet\n')
  return 2
}
