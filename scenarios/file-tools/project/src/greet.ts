export function greet(name: string): string {
  return `Helo, ${name}!`
}
