import type { SubagentProvider } from '@dsh/subagent'

export interface ProviderWording {
  description: string
  prompt: string
}

/**
 * Truthful wording for the model, derived from whether the bound provider's child sees
 * this conversation. A fresh child needs a standalone prompt; a forked one needs only
 * what is new.
 */
export function providerWording(provider: Pick<SubagentProvider, 'inheritsParentContext'>, background: boolean, backgroundMode: 'one-shot' | 'continuable' = 'one-shot'): ProviderWording {
  // A continuable instance always starts a child it keeps: every call returns the child's id at once.
  const returns =
    backgroundMode === 'continuable'
      ? ' It is a subagent you keep talking to: the call returns its id at once, you get a message each time it finishes a turn, and you send it more work with send_message.'
      : ' Returns the subagent\'s final answer.'
  const tail = !background || backgroundMode === 'continuable' ? '' : ' Set run_in_background to keep working while it runs; collect its answer later with task_output.'
  if (provider.inheritsParentContext) {
    return {
      description:
        'Delegate a task to a subagent that already sees this conversation up to this call, the current request and the results so far included. Say only what is new: the task and what to return.' +
        returns +
        tail,
      prompt: 'The task for the subagent. It already sees the conversation up to this call; say only what is new and what it should return.',
    }
  }
  return {
    description:
      'Delegate a self-contained task to a subagent. It does not see this conversation: the prompt must carry everything it needs (goal, context, constraints, what to return).' +
      returns +
      tail,
    prompt: 'The complete, standalone task for the subagent: it does not see this conversation, so include all needed context and say what to return.',
  }
}
