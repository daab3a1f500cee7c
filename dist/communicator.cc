// Communicator: non-blocking MPI collectives polled against the group's deadline.
#include "dist/communicator.h"

#include <climits>
#include <thread>

#include "absl/strings/str_cat.h"

namespace ls::dist {
namespace {

using Clock = std::chrono::steady_clock;

std::string MpiError(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int n = 0;
  if (MPI_Error_string(code, text, &n) != MPI_SUCCESS) return absl::StrCat("MPI error ", code);
  return std::string(text, static_cast<size_t>(n));
}

// Byte counts as MPI's int counts and displacements; false when one does not fit.
bool ToCounts(const std::vector<int64_t>& bytes, std::vector<int>* counts, std::vector<int>* displs) {
  counts->resize(bytes.size());
  displs->resize(bytes.size());
  int64_t offset = 0;
  for (size_t p = 0; p < bytes.size(); ++p) {
    if (bytes[p] < 0 || bytes[p] > INT_MAX || offset > INT_MAX) return false;
    (*counts)[p] = static_cast<int>(bytes[p]);
    (*displs)[p] = static_cast<int>(offset);
    offset += bytes[p];
  }
  return true;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> Communicator::Init(int* argc, char*** argv) {
  int provided = 0;
  if (const int rc = MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided); rc != MPI_SUCCESS)
    return absl::UnavailableError(absl::StrCat("MPI_Init_thread: ", MpiError(rc)));
  if (provided < MPI_THREAD_SERIALIZED)
    return absl::UnavailableError(
        "MPI gives no MPI_THREAD_SERIALIZED support; the engine's loop thread (not the main thread) makes the "
        "group's calls");
  std::unique_ptr<Communicator> c(new Communicator());
  c->owns_mpi_ = true;
  MPI_Comm_dup(MPI_COMM_WORLD, &c->comm_);
  c->TakeComm();
  MPI_Comm node;
  if (MPI_Comm_split_type(c->comm_, MPI_COMM_TYPE_SHARED, c->rank_, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
    int local = 0;
    MPI_Comm_rank(node, &local);
    c->local_rank_ = local;
    MPI_Comm_free(&node);
  }
  char name[MPI_MAX_PROCESSOR_NAME];
  int n = 0;
  if (MPI_Get_processor_name(name, &n) == MPI_SUCCESS) c->host_.assign(name, static_cast<size_t>(n));
  return c;
}

void Communicator::TakeComm() {
  // Errors come back as codes (the group fails cleanly) instead of aborting the job.
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  int rank = 0, size = 1;
  MPI_Comm_rank(comm_, &rank);
  MPI_Comm_size(comm_, &size);
  rank_ = rank;
  size_ = size;
}

Communicator::~Communicator() {
  if (!ok()) return;
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  if (owns_mpi_) MPI_Finalize();
}

std::unique_ptr<Communicator> Communicator::Duplicate() const {
  std::unique_ptr<Communicator> c(new Communicator());
  MPI_Comm_dup(comm_, &c->comm_);
  MPI_Comm_set_errhandler(c->comm_, MPI_ERRORS_RETURN);
  c->rank_ = rank_;
  c->size_ = size_;
  c->local_rank_ = local_rank_;
  c->host_ = host_;
  c->timeout_ = timeout_;
  return c;
}

std::unique_ptr<Communicator> Communicator::Split(int32_t color) {
  std::unique_ptr<Communicator> c(new Communicator());
  if (MPI_Comm_split(comm_, color, rank_, &c->comm_) != MPI_SUCCESS) return nullptr;
  c->TakeComm();
  c->local_rank_ = local_rank_;
  c->host_ = host_;
  c->parent_ = this;  // its deadline is this group's
  return c;
}

bool Communicator::OnOneHost() const {
  MPI_Comm node;
  if (MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node) != MPI_SUCCESS) return false;
  int n = 0;
  MPI_Comm_size(node, &n);
  MPI_Comm_free(&node);
  return n == size_;
}

bool Communicator::ok() const {
  if (parent_ && !parent_->ok()) return false;
  MutexLock lock(&mu_);
  return error_.empty();
}

std::string Communicator::error() const {
  {
    MutexLock lock(&mu_);
    if (!error_.empty()) return error_;
  }
  return parent_ ? parent_->error() : std::string();
}

void Communicator::Fail(const std::string& reason) {
  {
    MutexLock lock(&mu_);
    if (error_.empty()) error_ = reason.empty() ? "the rank group failed" : reason;
  }
  if (parent_) parent_->Fail(reason);
}

bool Communicator::Wait(MPI_Request* request, const char* what) {
  const auto deadline = Clock::now() + timeout();
  for (int polls = 0;; ++polls) {
    int done = 0;
    if (const int rc = MPI_Test(request, &done, MPI_STATUS_IGNORE); rc != MPI_SUCCESS) {
      Fail(absl::StrCat("rank ", rank_, ": ", what, " failed: ", MpiError(rc)));
      return false;
    }
    if (done) return true;
    if (Clock::now() > deadline) {
      // The request stays pending; this process makes no MPI call any more.
      Fail(absl::StrCat("rank ", rank_, ": ", what, " did not complete within ", timeout().count(),
                        " ms: a rank of the group died or stopped answering"));
      return false;
    }
    // Poll hard for a moment (the peers are usually close), then give the CPU away: ranks may
    // share cores with each other.
    if (polls > 2000) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    } else if (polls > 100) {
      std::this_thread::yield();
    }
  }
}

bool Communicator::Exchange(Clock::time_point t0, const char* call, const char* what,
                            const std::function<int(MPI_Request*)>& start) {
  MPI_Request request;
  const int r = start(&request);
  const bool done = r == MPI_SUCCESS ? Wait(&request, what) : false;
  if (r != MPI_SUCCESS) Fail(absl::StrCat("rank ", rank_, ": ", call, ": ", MpiError(r)));
  exchange_seconds_ += std::chrono::duration<double>(Clock::now() - t0).count();
  return done;
}

bool Communicator::WaitFor(const std::function<bool()>& done) {
  if (!ok()) return false;
  const auto deadline = Clock::now() + timeout();
  for (int polls = 0; !done(); ++polls) {
    if (Clock::now() > deadline) {
      Fail(absl::StrCat("rank ", rank_, ": a device transfer did not complete within ", timeout().count(),
                        " ms: a rank of the group died or stopped answering"));
      return false;
    }
    if (polls > 100) std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  return true;
}

bool Communicator::AllToAll(const void* send, const std::vector<int64_t>& send_bytes, void* recv,
                            const std::vector<int64_t>& recv_bytes) {
  if (!ok()) return false;
  const auto t0 = Clock::now();
  std::vector<int> sc, sd, rc, rd;
  if (static_cast<int32_t>(send_bytes.size()) != size_ || static_cast<int32_t>(recv_bytes.size()) != size_) {
    Fail(absl::StrCat("rank ", rank_, ": an all-to-all needs one count per rank (", size_, ")"));
    return false;
  }
  if (!ToCounts(send_bytes, &sc, &sd) || !ToCounts(recv_bytes, &rc, &rd)) {
    Fail(absl::StrCat("rank ", rank_, ": an all-to-all block exceeds MPI's 2 GiB count"));
    return false;
  }
  // MPI (Open MPI's non-blocking collectives, for one) takes send == recv as an in-place exchange,
  // which would pair wrong counts with the peers. Buffers of one caller coincide only when one
  // side is empty: give that side a buffer of its own.
  static char empty_side;
  if (send == recv && send != nullptr) {
    const int64_t sent = sd.back() + sc.back(), received = rd.back() + rc.back();
    if (sent != 0 && received != 0) {
      Fail(absl::StrCat("rank ", rank_, ": an all-to-all with overlapping send and receive buffers"));
      return false;
    }
    if (sent == 0) {
      send = &empty_side;
    } else {
      recv = &empty_side;
    }
  }
  return Exchange(t0, "MPI_Ialltoallv", "the expert all-to-all", [&](MPI_Request* request) {
    return MPI_Ialltoallv(send, sc.data(), sd.data(), MPI_BYTE, recv, rc.data(), rd.data(), MPI_BYTE, comm_, request);
  });
}

bool Communicator::AllToAllCounts(const std::vector<int64_t>& send, std::vector<int64_t>* recv) {
  recv->assign(static_cast<size_t>(size_), 0);
  if (!ok()) return false;
  if (static_cast<int32_t>(send.size()) != size_) {
    Fail(absl::StrCat("rank ", rank_, ": an all-to-all of counts needs one count per rank (", size_, ")"));
    return false;
  }
  const bool done =
      Exchange(Clock::now(), "MPI_Ialltoall", "the all-to-all of expert row counts", [&](MPI_Request* request) {
        return MPI_Ialltoall(send.data(), 1, MPI_INT64_T, recv->data(), 1, MPI_INT64_T, comm_, request);
      });
  if (!done) recv->assign(static_cast<size_t>(size_), 0);
  return done;
}

bool Communicator::Broadcast(void* data, size_t bytes, int32_t root) {
  if (!ok()) return false;
  if (bytes > static_cast<size_t>(INT_MAX)) {
    Fail(absl::StrCat("rank ", rank_, ": a broadcast of ", bytes, " bytes exceeds MPI's 2 GiB count"));
    return false;
  }
  MPI_Request request;
  const int r = MPI_Ibcast(data, static_cast<int>(bytes), MPI_BYTE, root, comm_, &request);
  if (r != MPI_SUCCESS) {
    Fail(absl::StrCat("rank ", rank_, ": MPI_Ibcast: ", MpiError(r)));
    return false;
  }
  return Wait(&request, "a broadcast");
}

bool Communicator::AllReduceSum(float* data, int64_t n) {
  if (!ok()) return false;
  if (n > INT_MAX) {
    Fail(absl::StrCat("rank ", rank_, ": an all-reduce of ", n, " values exceeds MPI's count"));
    return false;
  }
  return Exchange(Clock::now(), "MPI_Iallreduce", "the tensor-parallel all-reduce", [&](MPI_Request* request) {
    return MPI_Iallreduce(MPI_IN_PLACE, data, static_cast<int>(n), MPI_FLOAT, MPI_SUM, comm_, request);
  });
}

bool Communicator::AllGather(const float* send, int64_t n, float* recv) {
  if (!ok()) return false;
  if (n > INT_MAX) {
    Fail(absl::StrCat("rank ", rank_, ": an all-gather of ", n, " values exceeds MPI's count"));
    return false;
  }
  return Exchange(Clock::now(), "MPI_Iallgather", "the tensor-parallel all-gather", [&](MPI_Request* request) {
    return MPI_Iallgather(send, static_cast<int>(n), MPI_FLOAT, recv, static_cast<int>(n), MPI_FLOAT, comm_, request);
  });
}

bool Communicator::BroadcastBytes(std::string* bytes) {
  int64_t n = rank_ == 0 ? static_cast<int64_t>(bytes->size()) : 0;
  if (!Broadcast(&n, sizeof(n), 0)) return false;
  if (rank_ != 0) bytes->resize(static_cast<size_t>(n));
  return n == 0 || Broadcast(bytes->data(), static_cast<size_t>(n), 0);
}

bool Communicator::ScatterBytes(const std::vector<std::string>& all, std::string* mine) {
  if (!ok()) return false;
  std::vector<int64_t> sizes;
  std::string joined;
  if (rank_ == 0) {
    if (static_cast<int32_t>(all.size()) != size_) {
      Fail(absl::StrCat("rank 0: a scatter needs one message per rank (", size_, ")"));
      return false;
    }
    for (const std::string& m : all) {
      sizes.push_back(static_cast<int64_t>(m.size()));
      joined += m;
    }
  }
  int64_t n = 0;
  MPI_Request request;
  int r = MPI_Iscatter(sizes.data(), 1, MPI_INT64_T, &n, 1, MPI_INT64_T, 0, comm_, &request);
  if (r != MPI_SUCCESS) {
    Fail(absl::StrCat("rank ", rank_, ": MPI_Iscatter: ", MpiError(r)));
    return false;
  }
  if (!Wait(&request, "the scatter of the leader's messages")) return false;
  std::vector<int> counts, displs;
  if (rank_ == 0 && !ToCounts(sizes, &counts, &displs)) {
    Fail("rank 0: the leader's messages exceed MPI's 2 GiB count");
    return false;
  }
  if (n < 0 || n > INT_MAX) {
    Fail(absl::StrCat("rank ", rank_, ": a message of ", n, " bytes exceeds MPI's 2 GiB count"));
    return false;
  }
  mine->resize(static_cast<size_t>(n));
  r = MPI_Iscatterv(joined.data(), counts.data(), displs.data(), MPI_BYTE, mine->data(), static_cast<int>(n), MPI_BYTE,
                    0, comm_, &request);
  if (r != MPI_SUCCESS) {
    Fail(absl::StrCat("rank ", rank_, ": MPI_Iscatterv: ", MpiError(r)));
    return false;
  }
  return Wait(&request, "the scatter of the leader's messages");
}

bool Communicator::GatherBytes(const std::string& mine, std::vector<std::string>* all) {
  if (!ok()) return false;
  int64_t n = static_cast<int64_t>(mine.size());
  std::vector<int64_t> sizes(rank_ == 0 ? size_ : 0);
  MPI_Request request;
  int r = MPI_Igather(&n, 1, MPI_INT64_T, sizes.data(), 1, MPI_INT64_T, 0, comm_, &request);
  if (r != MPI_SUCCESS) {
    Fail(absl::StrCat("rank ", rank_, ": MPI_Igather: ", MpiError(r)));
    return false;
  }
  if (!Wait(&request, "the gather of the ranks' replies")) return false;
  std::vector<int> counts, displs;
  std::string joined;
  if (rank_ == 0) {
    if (!ToCounts(sizes, &counts, &displs)) {
      Fail("rank 0: the ranks' replies exceed MPI's 2 GiB count");
      return false;
    }
    joined.resize(static_cast<size_t>(displs.back()) + static_cast<size_t>(counts.back()));
  }
  if (n > INT_MAX) {
    Fail(absl::StrCat("rank ", rank_, ": a reply of ", n, " bytes exceeds MPI's 2 GiB count"));
    return false;
  }
  r = MPI_Igatherv(mine.data(), static_cast<int>(n), MPI_BYTE, joined.data(), counts.data(), displs.data(), MPI_BYTE, 0,
                   comm_, &request);
  if (r != MPI_SUCCESS) {
    Fail(absl::StrCat("rank ", rank_, ": MPI_Igatherv: ", MpiError(r)));
    return false;
  }
  if (!Wait(&request, "the gather of the ranks' replies")) return false;
  if (rank_ == 0) {
    all->resize(static_cast<size_t>(size_));
    for (int32_t p = 0; p < size_; ++p) (*all)[p] = joined.substr(static_cast<size_t>(displs[p]), counts[p]);
  }
  return true;
}

double Communicator::TakeExchangeSeconds() {
  const double s = exchange_seconds_;
  exchange_seconds_ = 0;
  return s;
}

}  // namespace ls::dist
