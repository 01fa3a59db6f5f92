"""rcca: Rubric-to-Code Credit Assignment, a training stack for web-app generation."""

from setuptools import find_packages, setup

EVALUATOR = [
    "playwright==1.65.2",
    "tree-sitter==0.26.1",
    "tree-sitter-html==0.23.2",
    "tree-sitter-javascript==0.25.0",
    "tree-sitter-css==0.25.0",
    "tqdm==4.70.1",
    "jsonschema==4.26.0",
    "httpx==0.28.1",
    "numpy>=1.26",
]
LOCALIZE = ["tokenizers==0.23.3", "transformers==5.23.0"]
# The accelerator side (rcca_jax). Code also runs on newer JAX; these are the tested pins.
JAX = ["jax==0.10.2", "flax==0.12.8", "optax==0.2.8", "ml-collections==1.1.0", "numpy>=1.26",
       "orbax-checkpoint==0.12.8", "tensorboardX==2.6.4", "tensorflow-datasets==4.9.10",
       "grain==0.2.18", "array-record==0.8.6", "importlib_resources==7.1.0", "absl-py>=2.1"]
RAY = ["ray==2.60.0"]
# Parity tests against the transformers reference. Install the CPU build of torch first
# (scripts/setup.sh does): a plain `pip install torch` on Linux pulls a CUDA build.
DEV = ["pytest==9.0.3", "pytest-timeout==2.4.0", "hypothesis==6.170.17", "torch==2.13.0",
       # `transformers serve`: a real OpenAI-compatible server for the judge's protocol test.
       "fastapi==0.165.0", "uvicorn==0.55.0", "openai==3.57.0", "starlette==1.10.0",
       "rich==15.0.0", "accelerate==1.16.0",
       # The figures of benchmarks/replication.py.
       "matplotlib==3.10.3"]

setup(
    name="rcca",
    version="0.1.0",
    description="Rubric-to-Code Credit Assignment: RL for interactive web apps",
    python_requires=">=3.11",
    packages=find_packages(include=["evaluators", "evaluators.*", "rcca_jax", "rcca_jax.*"]),
    package_data={"evaluators": ["schema/*.json", "examples/*.jsonl"],
                  "evaluators.cdn": ["packages.json"]},
    install_requires=EVALUATOR,
    extras_require={
        "localize": LOCALIZE,
        "jax": JAX,
        "tpu": JAX + ["jax[tpu]==0.10.2"],
        "ray": RAY,
        "dev": DEV + LOCALIZE + JAX + RAY,
    },
)
