"""`python -m toolrag.search --stages`: the stages a search runs, in order (search/pipeline.py `STAGES`)."""

from __future__ import annotations

import sys

from toolrag.search.pipeline import STAGES


def main(argv: list[str]) -> int:
    if argv != ["--stages"]:
        print("usage: python -m toolrag.search --stages", file=sys.stderr)
        return 2
    width = max(len(stage.name) for stage in STAGES)
    for number, stage in enumerate(STAGES, 1):
        print(f"{number}. {stage.name:<{width}}  {stage.module}: {stage.does}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
