"""Host µs per call of one Triton launch and of ten chained ones (bench_triton.py's user_fn
and chain_fn) for eager, minidynamo, its CUDA-graph mode and a raw CUDA graph replay, and
the time of each line of the generated launch program (GPU).

    python bench/launch_floor.py [--rounds 9] [--lines]

Prints min and median over interleaved rounds of 2,000 calls."""
import argparse
import statistics
import sys
import timeit

import torch

import bench_triton as B
import minidynamo


def rounds_us(fs: dict, args, rounds: int, n: int = 2000) -> dict:
    """name -> (min, median) µs per call over bench_triton's interleaved rounds."""
    samples = B.call_samples_us(fs, args, rounds, n)
    return {k: (min(v), statistics.median(v)) for k, v in samples.items()}


def sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def program_lines(entry, a, b):
    """(statement, µs) for each line the launch program runs, timed alone in its namespace."""
    fn = entry.run
    ns = {v: c.cell_contents for v, c in zip(fn.__code__.co_freevars, fn.__closure__ or ())}
    ns.update(a=a, b=b)
    src = entry.source_text.splitlines()
    start = next(i for i, line in enumerate(src) if line.strip().startswith("if not (") and "_md_ok" not in line)
    out = [("state check", src[start].strip()[len("if not ("):-2])]
    skip = False
    for line in src[start + 1:]:
        if not line.startswith("        "):
            break
        text = line.strip()
        deep = line.startswith("            ")
        if text.startswith("return"):
            break
        if text.startswith("if "):
            out.append(("cond", text[3:-1]))
            skip = True
        elif text == "else:":
            skip = False
        elif not (deep and skip):
            out.append(("stmt", text))
    timed = []
    out.insert(0, ("cond", "None"))  # what timing one line costs by itself
    for kind, text in out:
        code = compile(text, "<line>", "eval" if kind != "stmt" else "exec")
        if kind == "stmt":
            exec(code, ns)
        sync()
        t = min(timeit.repeat(lambda: eval(code, ns), number=2000, repeat=5)) / 2000 * 1e6
        sync()
        timed.append((t, text))
    return timed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--lines", action="store_true")
    opts = ap.parse_args()
    a = torch.randn(B.N, device="cuda")
    b = torch.randn(B.N, device="cuda")
    print(f"GPU: {torch.cuda.get_device_name()}, torch {torch.__version__}, triton {B.triton.__version__}, "
          f"Python {sys.version.split()[0]}, minidynamo from {minidynamo.__file__}")
    for name, fn in (("user_fn", B.user_fn), ("chain_fn", B.chain_fn)):
        fn(a, b)
        vs = {"eager": fn, "minidynamo": minidynamo.optimize(fn),
              "cudagraphs": minidynamo.optimize(mode="cudagraphs")(fn)}
        ref = fn(a, b)
        for f in vs.values():
            torch.testing.assert_close(f(a, b), ref)
        vs["raw replay"] = B.raw_cuda_graph(fn, a, b)
        us = rounds_us(vs, (a, b), opts.rounds)
        print(name, "  ".join(f"{k} {lo:.2f}/{med:.2f}" for k, (lo, med) in us.items()), flush=True)
        if opts.lines:
            entry = vs["minidynamo"].cache_entries()[0]
            for t, text in program_lines(entry, a, b):
                print(f"    {t:6.2f}  {text[:110]}")
            f = vs["minidynamo"]
            print(f"    {min(timeit.repeat(lambda: f(a, b), number=2000, repeat=5)) / 2000 * 1e6:6.2f}  whole call")


if __name__ == "__main__":
    main()
