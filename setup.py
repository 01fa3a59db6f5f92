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
    "numpy>=1.26",
]
LOCALIZE = ["tokenizers==0.23.3", "transformers==5.23.0"]
DEV = ["pytest==9.0.3", "pytest-timeout==2.4.0"]

setup(
    name="rcca",
    version="0.1.0",
    description="Rubric-to-Code Credit Assignment: RL for interactive web apps",
    python_requires=">=3.11",
    packages=find_packages(include=["evaluators", "evaluators.*"]),
    package_data={"evaluators": ["cdn_packages.json", "schema/*.json", "examples/*.jsonl"]},
    install_requires=EVALUATOR,
    extras_require={"localize": LOCALIZE, "dev": DEV + LOCALIZE},
)
