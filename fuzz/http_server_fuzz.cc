// Fuzz target: raw bytes on an HTTP connection to the real HttpServer (in this process, on a
// loopback port), in front of the tiny model with an API key ("Bearer fuzz-key"), CORS for
// https://app.example, and a waiting queue of none, so that a generation request runs every step
// up to its submission and is then refused (429) rather than generated. Every route, header and
// body reader, the dashboard and stored-response routes, and what the server writes back are in
// reach. Whatever the bytes, no handler may fail: an exception out of one (answered 500, see
// UnexpectedFailure) is a fault of the server's that bad input must never cause.
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "fuzz/tiny_context.h"
#include "server/http_server.h"

namespace {

struct Served {
  ls::fuzz::TinyContext* tiny;
  ls::server::HttpServer* http;
};

Served& Server() {
  static Served* s = [] {
    auto* out = new Served();
    out->tiny = ls::fuzz::NewTiny(/*max_waiting=*/0, ls::server::ApiKeys::FromList({"fuzz-key"}));
    ls::server::HttpOptions o;
    o.host = "127.0.0.1";
    o.port = 0;
    o.threads = 1;
    o.header_timeout = std::chrono::seconds(2);
    o.responses_store_bytes = 1 << 20;
    o.allowed_origins = "https://app.example";
    out->http = new ls::server::HttpServer(o, out->tiny->api.get());
    if (!out->http->Start().ok()) std::abort();
    return out;
  }();
  return *s;
}

// Everything the server writes back until it closes the connection.
std::string Exchange(const uint8_t* data, size_t size) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) std::abort();
  timeval timeout{10, 0};  // well beyond the header timeout: the server closes first
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(Server().http->port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  // libFuzzer's timer signal interrupts blocking calls: a connect goes on in the background, the
  // others are tried again.
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    pollfd p{fd, POLLOUT, 0};
    int error = errno;
    if (error == EINTR) {
      while (::poll(&p, 1, -1) < 0 && errno == EINTR) {
      }
      socklen_t len = sizeof error;
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len);
    }
    if (error != 0) {
      std::fprintf(stderr, "cannot connect to the server: %s\n", std::strerror(error));
      std::abort();
    }
  }
  for (size_t sent = 0; sent < size;) {
    const ssize_t n = ::send(fd, data + sent, size - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the server closed early (it answered what it had read)
    sent += static_cast<size_t>(n);
  }
  ::shutdown(fd, SHUT_WR);  // the end of the input is the end of the client's requests
  std::string reply;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    reply.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return reply;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  Server();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 64 * 1024) return 0;
  const std::string reply = Exchange(data, size);
  // Counted as it is caught, before anything is written: by the time the server has closed the
  // connection, a fault of this input's is in the count, even one whose 500 could not be written.
  if (Server().tiny->api->handler_failures() > 0) {
    std::fprintf(stderr, "a handler failed (see the log line above); the server wrote:\n%s\n", reply.c_str());
    std::abort();
  }
  return 0;
}
