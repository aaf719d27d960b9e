"""Renders chat-template cases with Python's jinja2 as transformers does.

usage: python3 render.py CASES.json OUT.json

CASES.json is a list of {"template", "messages", "bos", "eos",
"add_generation_prompt"}; OUT.json gets a list of {"text"} or {"error"}.
The environment is transformers' (trim_blocks, lstrip_blocks, loop
controls, raise_exception, tojson with ensure_ascii=False).
"""
import json
import sys

from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(message):
    raise TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def main():
    cases = json.load(open(sys.argv[1]))
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    out = []
    for c in cases:
        try:
            text = env.from_string(c["template"]).render(
                messages=c["messages"], bos_token=c["bos"], eos_token=c["eos"],
                add_generation_prompt=c["add_generation_prompt"])
            out.append({"text": text})
        except Exception as e:  # the Go side must fail too
            out.append({"error": str(e)})
    json.dump(out, open(sys.argv[2], "w"))


main()
