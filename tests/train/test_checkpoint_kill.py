"""A process killed in the middle of an async save leaves the previous checkpoint usable."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import jax.numpy as jnp
import numpy as np

from rcca_jax.train.checkpoints import Checkpoints
from rcca_jax.train.config import CheckpointConfig

SCRIPT = textwrap.dedent("""
    import os, sys
    import jax.numpy as jnp
    from rcca_jax.train.checkpoints import Checkpoints
    from rcca_jax.train.config import CheckpointConfig
    ck = Checkpoints(sys.argv[1], CheckpointConfig(every_steps=1, max_to_keep=3))
    ck.save(1, {"w": jnp.full((64, 64), 1.0)}, {"stage": "rl", "step": 1})
    ck.wait()
    # Step 2 is large enough that its write is still running when the process dies.
    ck.save(2, {"w": jnp.full((4096, 4096), 2.0)}, {"stage": "rl", "step": 2})
    os._exit(9)
""")


def test_kill_during_save_keeps_last_complete(tmp_path):
    d = tmp_path / "ckpt"
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(d)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 9, proc.stderr[-2000:]
    ck = Checkpoints(d, CheckpointConfig(every_steps=1))
    assert ck.latest() == 1, sorted(p.name for p in d.iterdir())
    state, meta = ck.restore(1, {"w": jnp.zeros((64, 64))})
    assert meta == {"stage": "rl", "step": 1}
    np.testing.assert_array_equal(np.asarray(state["w"]), 1.0)
    ck.close()
