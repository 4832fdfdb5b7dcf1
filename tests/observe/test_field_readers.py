"""Where an engine's code reads each setting's field (bringup/observe/fieldreaders.py), and the link a
failing frame in that code makes to the setting (bringup/observe/links.reader_link).

The bundled files were scanned from the engines' own wheels (SGLang 0.5.23 and 0.5.16, vLLM 0.24.0
and the vLLM CPU build 0.32.0), so what these tests read of them is the engines' source."""

from __future__ import annotations

import textwrap

from bringup.observe.fieldreaders import _FIELD, SPECIFIC_FILES, fields, readers, specific
from bringup.observe.links import Setting, links, reader_link

# dev7's atom (bringup/data/faults/dev7.yaml, dev7-sglang-symm-mem-on-pcie): SGLang 0.5.23 on a
# PCIe box, the user's --enable-symm-mem; the error names no flag and no word of its name.
FRAMES = [
    "sglang/srt/distributed/parallel_state.py:init_model_parallel_group",
    "sglang/srt/distributed/device_communicators/pynccl_allocator.py:get_nccl_mem_pool",
]
LINE = ["RuntimeError: CUDA driver error: operation not supported"]


def test_the_fields_are_the_argument_class_s_and_a_scan_finds_the_functions_that_read_them(tmp_path):
    src = textwrap.dedent(
        """
        class Other:
            not_mine: int = 1

        @dataclasses.dataclass
        class ServerArgs:
            model_path: str
            enable_symm_mem: bool = False
            port: int = 30000

            def check(self):
                pass
        """
    )
    assert fields(src) == ["model_path", "enable_symm_mem"]  # fields with an underscore, of that class only
    pkg = tmp_path / "eng"
    (pkg / "dist").mkdir(parents=True)
    (pkg / "dist" / "alloc.py").write_text(
        "def pool():\n    if get_args().enable_symm_mem:\n        return 1\n\nENABLE_SYMM_MEM_X = 2\n"
    )
    from bringup.observe.sourcescan import scan

    got = scan(pkg, ["enable_symm_mem", "model_path"], (), _FIELD)
    assert got == {"enable_symm_mem": ["eng/dist/alloc.py:pool"]}  # an upper-case name is no field


def test_a_field_read_everywhere_says_nothing_and_one_read_in_a_few_files_does():
    assert specific(["a/x.py:f", "a/x.py:g", "a/y.py:h"])
    assert not specific([f"a/m{i}.py:f" for i in range(SPECIFIC_FILES + 1)])
    assert not specific([])


def test_the_bundled_scan_of_sglang_0_5_23_knows_who_reads_the_symmetric_memory_switch():
    sites = readers("sglang", "0.5.23")["enable_symm_mem"]
    assert (
        "sglang/srt/distributed/device_communicators/pynccl_allocator.py:is_symmetric_memory_enabled" in sites
    )
    assert not any("arg_groups" in s or s.endswith(":<module>") for s in sites)  # declarations are skipped
    assert "tp_size" not in readers("sglang", "0.5.23")  # read everywhere: not kept
    assert readers("sglang", "9.9.9") == {} and readers("sglang", None) == {}


def _symm(user: bool) -> Setting:
    return Setting(
        "--enable-symm-mem",
        "true",
        "enable_symm_mem",
        None,
        user,
        readers("sglang", "0.5.23")["enable_symm_mem"],
    )


def test_a_failing_module_that_reads_the_user_s_field_links_their_setting():
    link = reader_link(_symm(True), FRAMES, "sglang")
    assert link is not None and link.kind == "reader-file"
    assert "pynccl_allocator.py" in link.why
    assert any(lk.name == "--enable-symm-mem" for lk in links(LINE, FRAMES, [_symm(True)], "sglang"))


def test_the_engine_s_own_choice_is_linked_only_by_the_very_function_that_reads_it():
    assert reader_link(_symm(False), FRAMES, "sglang") is None  # another function of the file
    frames = [
        *FRAMES,
        "sglang/srt/distributed/device_communicators/pynccl_allocator.py:is_symmetric_memory_enabled",
    ]
    link = reader_link(_symm(False), frames, "sglang")
    assert link is not None and link.kind == "reader"
    # no scan, no link; a frame outside the files that read it, none
    assert (
        reader_link(Setting("--enable-symm-mem", "true", "enable_symm_mem", None, True), FRAMES, "sglang")
        is None
    )
    assert reader_link(_symm(True), ["sglang/srt/managers/scheduler.py:event_loop"], "sglang") is None


def _weights(failure_class: str) -> dict[str, float]:
    from bringup.observe.outcome import Outcome
    from bringup.search.evidence import Named, link_weights

    out = Outcome(
        status="fails", failure_class=failure_class, phase="distributed-init", evidence=LINE, frames=FRAMES
    )
    named = Named()
    link_weights(named, out, [_symm(True)], "sglang")
    return named.weights


def test_the_search_weighs_a_reader_link_except_under_a_failure_every_setting_draws_on():
    """An out-of-memory is raised where memory is sized, and that code reads every setting that eats
    memory: a reader there names no more than the class (dev5: the LoRA rank that sizing reads had
    outranked the switch that turned LoRA on)."""
    assert _weights("distributed-init").get("--enable-symm-mem", 0.0) > 0
    assert "--enable-symm-mem" not in _weights("oom-kv-cache")
