"""A minimal fake OpenAI-compatible server for testing latentserve-bench: streams max_tokens SSE
chunks ("tok") 10 ms apart, then a usage chunk and [DONE]; answers 429 for prompts of token id 13.
Prints its port on stdout, serves until killed."""
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if body.get("prompt") == [13]:
            data = b'{"error": {"message": "busy"}}'
            self.send_response(429)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        n = body.get("max_tokens", 16)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def send(s):
            b = s.encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(b), b))
            self.wfile.flush()

        for i in range(n):
            time.sleep(0.01)
            send("data: " + json.dumps({"choices": [{"index": 0, "text": "tok", "finish_reason": None}]}) + "\n\n")
        send("data: " + json.dumps({"choices": [], "usage": {"prompt_tokens": len(body.get("prompt", [])),
                                                           "completion_tokens": n}}) + "\n\n")
        send("data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
