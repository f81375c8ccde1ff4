// A local, deterministic provider standing in for an agent (no network, no model): it answers from the
// test's vars, so one promptfoo run holds passing, failing and erroring results over several repeats.
// `flaky_repeat` makes the n-th call for a test answer wrongly (promptfoo runs it with -j 1, in order).
const calls = new Map();

class ScriptedAgent {
  id() {
    return 'scripted-agent';
  }

  async callApi(prompt, context) {
    const vars = (context && context.vars) || {};
    if (vars.behaviour === 'error') {
      return { error: 'sandbox did not start: connection refused' };
    }
    const key = vars.question;
    const count = (calls.get(key) || 0) + 1;
    calls.set(key, count);
    const answer = Number(vars.flaky_repeat) === count ? vars.wrong_answer : vars.answer;
    return {
      output: `called ${vars.tool}; answer: ${answer}; cleaned up`,
      tokenUsage: { prompt: 100 + prompt.length, completion: 25, total: 125 + prompt.length },
      cost: 0.000125,
    };
  }
}

module.exports = ScriptedAgent;
