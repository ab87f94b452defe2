# A PreToolUse guard: the call arrives as JSON on standard input; a force push is refused.
if grep -Eq 'git push (.* )?(--force|-f)( |"|$)'; then
  echo 'force pushes are blocked by the team guard: push without --force, or ask a maintainer' >&2
  exit 2
fi
exit 0
