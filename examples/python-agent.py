#!/usr/bin/python3
"""A minimal agent loop on sandboxd: the model writes Lua, the sandbox runs it
with Python functions as tools, the rendered result goes back to the model,
and the variables of one chunk are there in the next.

A scripted model stands in for the LLM (swap `ScriptedModel` for a call to
your provider: it gets the messages, it returns text).  Run it against a
daemon:

    build/sandboxd -s /tmp/sbx.sock &
    SANDBOXD_SOCKET=/tmp/sbx.sock PYTHONPATH=client/python examples/python-agent.py
"""

import re

import sandboxd

# ---------------------------------------------------------------- the tools


class Weather:
    """Current weather."""

    DATA = {"Paris": 21.5, "London": 18.0}

    @sandboxd.tool
    def get(self, city, units="C"):
        """The current temperature of a city: {city = ..., temp = ..., units = ...}."""
        if city not in self.DATA:
            raise LookupError("no weather for %s" % city)
        return {"city": city, "temp": self.DATA[city], "units": units}


notes = {}


@sandboxd.tool(name="save", description="Keep a note under a key; returns the number of notes.")
def save_note(key, value):
    notes[key] = value
    return len(notes)


TOOLS = {"Weather": Weather(), "Notes": {"save": save_note}}

# ---------------------------------------------------------------- the "model"


class ScriptedModel:
    """Answers each turn with the next scripted reply; a real model would
    read `messages` (the system prompt holds the tool catalog)."""

    REPLIES = [
        "```lua\nparis = Weather.get('Paris')\nlondon = Weather.get('London')\n"
        "return paris.temp, london.temp\n```",
        "```lua\ndiff = paris.temp - london.temp\nNotes.save('diff', diff)\nreturn diff\n```",
        "```lua\nlocal warmer = diff > 0 and 'Paris' or 'London'\n"
        "return string.format('%s is warmer by %.1f degrees', warmer, math.abs(diff))\n```",
        "FINAL: {last}",
    ]

    def __init__(self):
        self.turn = 0

    def __call__(self, messages):
        reply = self.REPLIES[self.turn]
        self.turn += 1
        last = re.search(r'Result: "(.*)"', messages[-1]["content"])
        return reply.format(last=last.group(1) if last else "?")


# ---------------------------------------------------------------- the loop

CODE = re.compile(r"```lua\n(.*?)```", re.S)


def main():
    model = ScriptedModel()
    with sandboxd.Client() as client:
        in_session = "sessions" in client.features()      # functions persist too
        messages = [{"role": "system",
                     "content": client.system_prompt(TOOLS, session=in_session)}]
        messages.append({"role": "user", "content": "Which is warmer, Paris or London?"})
        with client.session(tools=TOOLS) as session:
            for _ in range(10):
                reply = model(messages)
                messages.append({"role": "assistant", "content": reply})
                m = CODE.search(reply)
                if not m:
                    print("final answer:", reply.removeprefix("FINAL: "))
                    return 0
                try:
                    observation = sandboxd.render(session.execute(m.group(1), timeout_ms=5000))
                except sandboxd.SandboxdError as e:
                    observation = sandboxd.render(e)  # the model sees the error and retries
                print("--- chunk\n%s--- observation\n%s" % (m.group(1), observation))
                messages.append({"role": "user", "content": observation})
    print("no final answer")
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
