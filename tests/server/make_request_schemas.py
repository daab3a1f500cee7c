"""Writes tests/server/data/request_schemas.json: the request fields of /v1/completions and
/v1/chat/completions as OpenAI's Python client declares them (its TypedDicts) and as vLLM's
server declares them (the pydantic models CompletionRequest and ChatCompletionRequest in
vllm/entrypoints/openai/protocol.py, read with ast: vLLM need not be installed).

    python3 tests/server/make_request_schemas.py --vllm-protocol PATH/TO/protocol.py

needs the `openai` package (build/venv has it). test_request_fields.py checks that the server
honours or refuses every field listed here.
"""
import argparse
import ast
import json
import os

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "request_schemas.json")


def typed_dict_keys(*tds):
    keys = set()
    for td in tds:
        for klass in td.__mro__:
            keys |= set(getattr(klass, "__annotations__", {}))
    return sorted(keys)


def pydantic_fields(path, class_name):
    tree = ast.parse(open(path).read())
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            names = []
            for stmt in node.body:
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                    ann = ast.unparse(stmt.annotation)
                    if not stmt.target.id.startswith("_") and not ann.startswith("ClassVar"):
                        names.append(stmt.target.id)
            return sorted(names)
    raise SystemExit(f"{path}: no class {class_name}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--vllm-protocol", required=True, help="vllm/entrypoints/openai/protocol.py")
    ap.add_argument("--vllm-version", default="", help="where the file came from, recorded in the output")
    args = ap.parse_args()
    import openai
    from openai.types import completion_create_params as c
    from openai.types.chat import completion_create_params as cc
    out = {
        "sources": {"openai": f"openai {openai.__version__} (Python client)", "vllm": args.vllm_version},
        "openai": {
            "completions": typed_dict_keys(c.CompletionCreateParamsNonStreaming, c.CompletionCreateParamsStreaming),
            "chat": typed_dict_keys(cc.CompletionCreateParamsNonStreaming, cc.CompletionCreateParamsStreaming),
        },
        "vllm": {
            "completions": pydantic_fields(args.vllm_protocol, "CompletionRequest"),
            "chat": pydantic_fields(args.vllm_protocol, "ChatCompletionRequest"),
        },
    }
    with open(OUT, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(OUT)


if __name__ == "__main__":
    main()
