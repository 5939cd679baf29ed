"""Module names as the program knows them: the TPU compiler's build cut off, a dumped
module's label read as its name, and the name read as JAX's log names the function."""

from __future__ import annotations

from xla_bugkit.hlo.names import function_name, module_name, program_name


def test_the_tpu_compilers_build_is_cut_off() -> None:
    assert program_name("jit_head.cl_933746096") == "jit_head"
    assert program_name("jit_head") == "jit_head"


def test_a_label_is_read_as_the_modules_name_which_may_hold_dots() -> None:
    assert module_name("module_0000.jit_head.cl_933746096") == "jit_head.cl_933746096"
    assert module_name("module_0006.jit_train_step") == "jit_train_step"
    assert module_name("jit_train_step") == "jit_train_step"  # no label: as it is


def test_the_function_is_named_as_jaxs_log_names_it() -> None:
    assert function_name("jit_head.cl_933746096") == "jit(head)"
    assert function_name("pmap_step") == "pmap(step)"
    assert function_name("xla_pmap_step") == "xla_pmap(step)"
    assert function_name("__inference_f_13") == "__inference_f_13"  # TensorFlow's, as it is
