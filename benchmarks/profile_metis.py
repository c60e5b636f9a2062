"""Profile one column's streaming path: ``python -m benchmarks.profile_metis``.

Runs the loopback server, warms the client up, then profiles ``--runs`` streams of the
section-1 workload with cProfile (``--tool pyinstrument`` for a call tree, if installed) and
prints the top functions by own time and by cumulative time, with file:line.

    python -m benchmarks.profile_metis --provider anthropic --runs 20
    python -m benchmarks.profile_metis --client floor --provider openai
    python -m benchmarks.profile_metis --tool pyinstrument
    python -m benchmarks.profile_metis --provider gemini --reads 16384   # large reads
    python -m benchmarks.profile_metis --complete --runs 200   # the non-streamed call (40 messages)
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time
import warnings

import anyio

from benchmarks import workload
from benchmarks.clients import CLIENTS, HISTORY_PROVIDERS, PROVIDERS, make_client
from benchmarks.server import ServerProcess
from benchmarks.workload import Scenario


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--provider", default="anthropic", choices=PROVIDERS)
    parser.add_argument("--client", default="metis", choices=CLIENTS)
    parser.add_argument("--deltas", type=int, default=2000)
    parser.add_argument("--fragments", type=int, default=200)
    parser.add_argument("--reads", type=int, default=0, help="HTTP chunk size; 0: one event")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--tool", default="cprofile", choices=["cprofile", "pyinstrument"])
    parser.add_argument("--out", help="also dump the cProfile stats to this file")
    parser.add_argument(
        "--complete",
        action="store_true",
        help="profile the non-streamed call (a 40-message history with 4 images) instead",
    )
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    if args.complete and args.provider not in HISTORY_PROVIDERS:
        parser.error(f"--complete takes one of {', '.join(HISTORY_PROVIDERS)}")
    scenario = (
        Scenario(20, 5) if args.complete else Scenario(args.deltas, args.fragments, args.reads)
    )
    turns = workload.history(40, images=4)

    with ServerProcess() as url:

        async def streams(n: int) -> float:
            client = make_client(args.client, args.provider, url)

            async def call() -> None:
                if args.complete:
                    await client.complete(scenario, turns)
                else:
                    await client.stream(scenario)

            try:
                for _ in range(3):
                    await call()
                start = time.process_time()
                if args.tool == "pyinstrument":
                    from pyinstrument import Profiler

                    profiler = Profiler(interval=0.0002, async_mode="disabled")
                    profiler.start()
                    for _ in range(n):
                        await call()
                    profiler.stop()
                    print(profiler.output_text(unicode=True, color=False, show_all=False))
                else:
                    profile = cProfile.Profile()
                    profile.enable()
                    for _ in range(n):
                        await call()
                    profile.disable()
                    if args.out:
                        profile.dump_stats(args.out)
                    for key in ("tottime", "cumulative"):
                        text = io.StringIO()
                        stats = pstats.Stats(profile, stream=text)
                        stats.sort_stats(key).print_stats(args.top)
                        print(f"==== by {key} ====")
                        print(_trim(text.getvalue()))
                return time.process_time() - start
            finally:
                await client.aclose()

        cpu = anyio.run(streams, args.runs)
    print(
        f"{args.runs} {'calls' if args.complete else 'streams'} profiled ({args.client}, "
        f"{args.provider}, {scenario.name}): {cpu:.2f} s CPU with the profiler on"
    )


def _trim(text: str) -> str:
    """Shorten site-packages and repository paths in the listing."""
    import os
    import sys

    root = os.getcwd() + os.sep
    for prefix in sorted({p for p in sys.path if p.endswith("site-packages")}, key=len):
        text = text.replace(prefix + os.sep, "")
    return text.replace(root, "")


if __name__ == "__main__":
    main()
