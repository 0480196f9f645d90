"""Stands in for `python -m llama_cpp.server` in the LlamaServer tests: takes the same flags,
answers GET /v1/models, and exits at once with status 3 when --model names `crash`."""

import argparse
import json
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer


def main() -> None:
    p = argparse.ArgumentParser()
    for flag in ("--model", "--model_alias", "--n_ctx", "--host", "--port", "--n_threads"):
        p.add_argument(flag)
    args = p.parse_args()
    if args.model.endswith("crash"):
        print("stub: refusing to load", args.model, flush=True)
        sys.exit(3)
    print(f"stub: n_ctx={args.n_ctx} alias={args.model_alias}", flush=True)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            data = json.dumps({"data": [{"id": args.model_alias, "n_ctx": int(args.n_ctx)}]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    HTTPServer((args.host, int(args.port)), Handler).serve_forever()


if __name__ == "__main__":
    main()
