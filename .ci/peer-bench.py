"""peer-bench.py PEER_DIR PRESET=MODEL_TYPE[,...] BENCH_ARGS...: the PyTorch peer's bench.py with
BENCH_ARGS, after giving each named preset of the peer (llama_ref.PRESETS) that model_type: the
peer's presets are Llamas, and its model builds Qwen2's layers (q/k/v biases) and Qwen3's (q/k
norms) from model_type, as mgrpo's presets name them (qwen2.5-0.5b is a Qwen2 in both)."""
import runpy
import sys

peer, arches, args = sys.argv[1], sys.argv[2], sys.argv[3:]
sys.path.insert(0, peer)
import llama_ref  # noqa: E402  (bench.py imports this very module)

for spec in arches.split(","):
    preset, model_type = spec.split("=")
    llama_ref.PRESETS[preset]["model_type"] = model_type
sys.argv = [peer + "/bench.py"] + args
runpy.run_path(peer + "/bench.py", run_name="__main__")
