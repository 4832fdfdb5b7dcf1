# The second H200 user-setting corpus (issue 36, item 6): sourced by h200_usercorpus.sh with
# UC_CASES=usercorpus2-h200.sh, in place of its built-in cases ($E, $UC and the early / late /
# late_req / stage_done functions are that script's). Each case: the engine's base plus ONE wrong
# setting; the predictions, sources and splits are in usercorpus2-h200.yaml (sealed cases: do not
# read their entries). Order within an engine is the launch order.
if [ "$E" = vllm ]; then
  # early: import, argument and config checks (API server), then the engine core's start
  early logging-stream-typo VLLM_LOGGING_STREAM=ext://sys.out
  early uds-dir-missing --uds "$UC/run/vllm.sock"
  early kernel-config-moe --kernel-config '{"moe_backend": "flashinfer"}'
  early long-partial-prefills-4 --max-long-partial-prefills 4
  early pcp-size-2 --prefill-context-parallel-size 2
  early dp-size-2 --data-parallel-size 2
  early device-ids-1 --device-ids 1
  early attention-config-flashmla --attention-config '{"backend": "FLASHMLA"}'
  stage_done early
  # late: once the engine is up, when the HTTP server starts
  late ssl-keyfile-alone --ssl-keyfile "$UC/server.key"
  stage_done late
else
  # early: argument parsing and ServerArgs (main process), the tokenizer manager, then the scheduler
  early spec-algorithm-medusa --speculative-algorithm medusa
  early decrypted-config-missing --decrypted-config-file "$UC/config.json"
  early tokenizer-path-missing --tokenizer-path "$UC/Meta-Llama-3-8B-Instruct"
  early completion-template-starcoder --completion-template starcoder
  early random-seed-negative --random-seed -1
  early dist-init-addr-head --dist-init-addr sglang-head-0:50000
  early dp-size-2 --dp-size 2
  early pp-size-2 --pp-size 2
  early model-checksum-path --model-checksum "$UC/tiny.sha256.json"
  early modelopt-quant-fp8 --modelopt-quant fp8
  stage_done early
  # late: the attention backend built on the memory pool
  late triton-split-tile-0 --triton-attention-split-tile-size 0
  stage_done late
fi
