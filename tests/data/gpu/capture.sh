#!/usr/bin/env bash
# Record what a GPU machine says, for tests/data/gpu/<machine>-<date>/ (run from the repo root,
# with $OUT set to a folder that comes back). Used once on the H200 lent machine, 2026-11-29.
set -u
export PYTHONUNBUFFERED=1
R=$OUT/rec
mkdir -p "$R"
q=index,name,uuid,pci.bus_id,driver_version,memory.total,memory.used,compute_cap
nvidia-smi > "$R/nvidia-smi.txt" 2>&1
nvidia-smi -q > "$R/smi-q.txt" 2>&1
nvidia-smi --query-gpu=$q --format=csv > "$R/query-gpu.csv" 2>&1
nvidia-smi topo -m > "$R/topo.txt" 2>&1
python3 -m bringup.facts.hardware --record "$R/recorded" > "$R/record.log" 2>&1
# The doctor through the CLI (typer/rich) and through the dependency-free module entry point.
{ time python3 -m bringup doctor --json --smem > "$R/doctor-cli.json" ; } 2> "$R/doctor-cli.err"
{ time python3 -m bringup.facts.hardware --json --smem > "$R/doctor-module.json" ; } 2> "$R/doctor-module.err"
{ time python3 -m bringup.facts.hardware --json > "$R/doctor-nosmem.json" ; } 2> "$R/doctor-nosmem.err"
python3 tests/data/gpu/context_probe.py > "$R/context.json" 2> "$R/context.err"
# The fingerprint on header-only model folders made here (Llama-3-8B in 4 shards; GLM-5 shapes, 5 layers + MTP, NVFP4).
python3 - > "$R/make-models.log" 2>&1 <<'PY'
import json
from bringup.facts import modelinfo as mi
mi.write_header_only_model("/tmp/llama3", json.load(open("tests/data/configs/llama-3-8b.json")), shards=4)
cfg = json.load(open("tests/data/configs/glm-5.json")) | {"num_hidden_layers": 5}
d = mi.write_header_only_model("/tmp/glm5", cfg, shards=2, quant="nvfp4")
(d / "hf_quant_config.json").write_text(json.dumps({"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8", "group_size": 16}}))
print("ok")
PY
python3 -m bringup model /tmp/llama3 --json > "$R/model-llama3-cli.json" 2>&1
python3 -m bringup.facts.modelinfo /tmp/glm5 --json > "$R/model-glm5-module.json" 2>&1
python3 -m bringup plan /tmp/glm5 --weights-gib 62 --tp 8 --gpus 8 --mem-fraction 0.95 --gpu-mem-gib 96 --cc 12.0 --json > "$R/plan-seeds-095.json" 2>&1
python3 -m bringup plan /tmp/llama3 --tp 1 --mem-fraction 0.9 --engine vllm --json > "$R/plan-llama3-here.json" 2>&1
python3 -m pip list 2>/dev/null | grep -iE "^(torch|triton|transformers|nvidia-ml-py|typer|rich|pydantic|psutil|numpy|safetensors) " > "$R/pip-list.txt"
python3 --version >> "$R/pip-list.txt" 2>&1
tar czf "$OUT/h200-rec.tar.gz" -C "$OUT" rec
cp "$R/doctor-cli.json" "$OUT/doctor-cli.json" 2>/dev/null
echo done
