"""What inferring requirements costs on the catalog of the fourth security review (issue 48, R4-3), for
docs/reliability.md.

    python benchmarks/inference_cost.py [--producers 20] [--fields 256] [--consumers 2] [--parameters 150]

The catalog is made of valid tools at what registration allows: `--producers` tools whose output schemas hold
`--fields` fields each, and `--consumers` tools of `--parameters` required parameters, every name and description as
long as a schema of MAX_SCHEMA_CHARS holds. Each producer's fields share a name word of their own (a block of exactly
MAX_BLOCK fields, so none is crowded) and every parameter's name holds all those words, so before the fix each
parameter was scored against every field (1.5 million pairs), each pair tokenizing two long descriptions.

Printed: the CPU time of one inference (`infer`, what a snapshot computes once), its pairs scored, and the same for
the inference as a principal who sees every tool reads it (the crowded-block check per visibility).
"""

from __future__ import annotations

import argparse
import json
import random
import string
import time

from toolrag.model import MAX_SCHEMA_CHARS, Tool
from toolrag.search.inferred import MAX_BLOCK, infer


def word(rng: random.Random) -> str:
    """A random word that stays itself when singularized (no trailing s)."""
    return "".join(rng.choices(string.ascii_lowercase, k=rng.randint(5, 9))) + "x"


def text(rng: random.Random, chars: int) -> str:
    words: list[str] = []
    while sum(len(w) + 1 for w in words) < chars:
        words.append(word(rng))
    return " ".join(words)[:chars].strip()


def catalog(producers: int, fields: int, consumers: int, parameters: int) -> list[Tool]:
    rng = random.Random(48)
    owned = [f"own{letter}{word(rng)}" for letter in string.ascii_lowercase[:producers]]
    tools = []
    # Room for each field's description once its name and the JSON around it are counted.
    field_chars = MAX_SCHEMA_CHARS // fields - 100
    for n, mark in enumerate(owned):
        properties = {
            f"{mark}_{word(rng)}": {"type": "string", "description": text(rng, field_chars)} for _ in range(fields)
        }
        tools.append(
            Tool(
                name=f"producer_{n}",
                description="Produces many values.",
                input_schema={"type": "object", "properties": {}},
                output_schema={"type": "object", "properties": properties},
            )
        )
    every_mark = "_".join(owned)
    # Each name is written twice: as a property and in `required`.
    parameter_chars = MAX_SCHEMA_CHARS // parameters - 2 * (len(every_mark) + 16) - 60
    for n in range(consumers):
        properties = {
            f"{every_mark}_{word(rng)}": {"type": "string", "description": text(rng, parameter_chars)}
            for _ in range(parameters)
        }
        schema = {"type": "object", "properties": properties, "required": list(properties)}
        tools.append(Tool(name=f"consumer_{n}", description="Needs many values.", input_schema=schema))
    for tool in tools:  # what registration would refuse is not this benchmark's
        for schema in (tool.input_schema, tool.output_schema or {}):
            assert len(json.dumps(schema)) <= MAX_SCHEMA_CHARS
    return tools


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--producers", type=int, default=20)
    parser.add_argument("--fields", type=int, default=MAX_BLOCK)
    parser.add_argument("--consumers", type=int, default=2)
    parser.add_argument("--parameters", type=int, default=150)
    args = parser.parse_args()
    tools = catalog(args.producers, args.fields, args.consumers, args.parameters)
    schema_chars = sum(len(json.dumps(t.input_schema)) + len(json.dumps(t.output_schema or {})) for t in tools)
    print(f"{len(tools)} tools, {schema_chars:,} characters of schemas")
    cpu, wall = time.process_time(), time.perf_counter()
    relations = infer(tools)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    edges = sum(len(e) for e in relations.edges.values())
    print(f"one inference: {cpu:.2f} s CPU ({wall:.2f} s wall), {relations.compared:,} pairs scored, {edges} edges")
    names = {tool.name for tool in tools}
    cpu = time.process_time()
    seen = relations.seen_by(lambda name: name in names)
    found = sum(len(seen.of(tool.name)) for tool in tools)
    print(f"read as a principal who sees every tool: {time.process_time() - cpu:.2f} s CPU, {found} edges")


if __name__ == "__main__":
    main()
