"""perf.tune_malloc: glibc takes the settings (and the defaults back); elsewhere it says False."""
import ctypes.util
import platform

import pytest

from minitransformer.fast.perf import tune_malloc


def _is_glibc():
    return platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"


@pytest.mark.skipif(not _is_glibc(), reason="mallopt is glibc's; elsewhere tune_malloc returns False")
def test_glibc_takes_the_settings_and_the_defaults_back():
    assert ctypes.util.find_library("c") is not None
    assert tune_malloc() is True
    assert tune_malloc(restore=True) is True
    assert tune_malloc() is True       # fast.train() leaves it on; so does this test


@pytest.mark.skipif(_is_glibc(), reason="on glibc the settings apply")
def test_without_glibc_it_does_nothing():
    assert tune_malloc() is False
