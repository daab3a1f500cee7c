// The rank group's MPI communicator, run by mpirun on every rank (ctest: -np 2 and -np 4): blocks of
// an all-to-all reach the right ranks, including when one side is empty and shares the other's
// buffer (MPI would take that for an in-place exchange); counts transpose; broadcast, scatter and
// gather carry bytes; and a rank that never joins a collective fails the others within the deadline
// instead of hanging them, the failure sticking.
#include "dist/communicator.h"

#include <gtest/gtest.h>

#include <chrono>
#include <numeric>
#include <thread>

#include "tests/dist/mpi_test_main.h"

namespace ls::dist {
namespace {

Communicator* g_comm = nullptr;

using Clock = std::chrono::steady_clock;

// Byte b of the block rank `from` sends rank `to`.
char Pattern(int from, int to, int64_t b) { return static_cast<char>(from * 31 + to * 7 + b); }

TEST(Communicator, AllToAllMovesEachBlockToItsRank) {
  Communicator& c = *g_comm;
  const int R = c.size(), me = c.rank();
  std::vector<int64_t> send_bytes(R), recv_bytes(R);
  for (int p = 0; p < R; ++p) {
    send_bytes[p] = (me + 1) * 1000 + p * 17;  // differs for every (sender, receiver)
    recv_bytes[p] = (p + 1) * 1000 + me * 17;
  }
  std::string send, recv(std::accumulate(recv_bytes.begin(), recv_bytes.end(), int64_t{0}), '\0');
  for (int p = 0; p < R; ++p)
    for (int64_t b = 0; b < send_bytes[p]; ++b) send.push_back(Pattern(me, p, b));
  ASSERT_TRUE(c.AllToAll(send.data(), send_bytes, recv.data(), recv_bytes)) << c.error();
  int64_t at = 0;
  for (int p = 0; p < R; ++p)
    for (int64_t b = 0; b < recv_bytes[p]; ++b, ++at) ASSERT_EQ(recv[at], Pattern(p, me, b)) << "from " << p;
}

TEST(Communicator, EmptySideSharingTheOtherSidesBufferIsNoInPlaceExchange) {
  // Rank 0 only receives (as in a combine whose rows all came from elsewhere); every other rank
  // sends it a block. Rank 0's send and receive pointers coincide.
  Communicator& c = *g_comm;
  const int R = c.size(), me = c.rank();
  const int64_t block = 1 << 20;  // large enough for MPI's rendezvous protocol
  std::vector<int64_t> send_bytes(R, 0), recv_bytes(R, 0);
  std::string buffer;
  if (me == 0) {
    for (int p = 1; p < R; ++p) recv_bytes[p] = block;
    buffer.assign(static_cast<size_t>(block * (R - 1)), '\0');
    ASSERT_TRUE(c.AllToAll(buffer.data(), send_bytes, buffer.data(), recv_bytes)) << c.error();
    for (int p = 1; p < R; ++p) EXPECT_EQ(buffer[(p - 1) * block + 5], Pattern(p, 0, 5));
  } else {
    send_bytes[0] = block;
    for (int64_t b = 0; b < block; ++b) buffer.push_back(Pattern(me, 0, b));
    ASSERT_TRUE(c.AllToAll(buffer.data(), send_bytes, buffer.data(), recv_bytes)) << c.error();
  }
}

TEST(Communicator, CountsTranspose) {
  Communicator& c = *g_comm;
  std::vector<int64_t> send(c.size()), recv;
  for (int p = 0; p < c.size(); ++p) send[p] = 100 * c.rank() + p;
  ASSERT_TRUE(c.AllToAllCounts(send, &recv)) << c.error();
  for (int p = 0; p < c.size(); ++p) EXPECT_EQ(recv[p], 100 * p + c.rank());
}

TEST(Communicator, BroadcastAndGatherCarryBytes) {
  Communicator& c = *g_comm;
  std::string plan = c.rank() == 0 ? std::string(100000, 'p') + "end" : "";
  ASSERT_TRUE(c.BroadcastBytes(&plan)) << c.error();
  EXPECT_EQ(plan.size(), 100003u);
  EXPECT_EQ(plan.substr(100000), "end");
  std::vector<std::string> all;
  const std::string mine(static_cast<size_t>(c.rank()) * 3, static_cast<char>('a' + c.rank()));
  ASSERT_TRUE(c.GatherBytes(mine, &all)) << c.error();
  if (c.rank() == 0) {
    ASSERT_EQ(all.size(), static_cast<size_t>(c.size()));
    for (int p = 0; p < c.size(); ++p) EXPECT_EQ(all[p], std::string(p * 3, static_cast<char>('a' + p)));
  } else {
    EXPECT_TRUE(all.empty());
  }
}

TEST(Communicator, ScatterGivesEachRankItsOwnBytes) {
  Communicator& c = *g_comm;
  std::vector<std::string> all;
  if (c.rank() == 0)
    for (int p = 0; p < c.size(); ++p)
      all.push_back(std::string(static_cast<size_t>(p) * 1000, static_cast<char>('A' + p)));
  std::string mine = "stale";
  ASSERT_TRUE(c.ScatterBytes(all, &mine)) << c.error();
  EXPECT_EQ(mine, std::string(static_cast<size_t>(c.rank()) * 1000, static_cast<char>('A' + c.rank())));
}

// Last: it leaves a failed communicator (a duplicate, so the group's own stays healthy).
TEST(Communicator, MissingRankFailsTheOthersWithinTheDeadline) {
  std::unique_ptr<Communicator> group = g_comm->Duplicate();
  group->set_timeout(std::chrono::milliseconds(300));
  const int silent = group->size() - 1;  // this rank never joins the collective
  if (group->rank() != silent) {
    const auto t0 = Clock::now();
    std::vector<int64_t> recv;
    EXPECT_FALSE(group->AllToAllCounts(std::vector<int64_t>(group->size(), 1), &recv));
    const double waited = std::chrono::duration<double>(Clock::now() - t0).count();
    EXPECT_GE(waited, 0.29);
    EXPECT_LT(waited, 3.0) << "bounded by the deadline, not by the missing rank";
    EXPECT_FALSE(group->ok());
    EXPECT_NE(group->error().find("did not complete within 300 ms"), std::string::npos) << group->error();
    EXPECT_EQ(recv, std::vector<int64_t>(group->size(), 0)) << "no stale counts after a failure";
    // The failure sticks: nothing waits any more.
    const auto t1 = Clock::now();
    std::string bytes = "x";
    EXPECT_FALSE(group->BroadcastBytes(&bytes));
    EXPECT_FALSE(group->AllToAll(nullptr, std::vector<int64_t>(group->size(), 0), nullptr,
                                 std::vector<int64_t>(group->size(), 0)));
    EXPECT_FALSE(group->WaitFor([] { return true; }));
    EXPECT_LT(std::chrono::duration<double>(Clock::now() - t1).count(), 0.05);
  }
  // The group's own communicator is untouched: everyone meets again.
  std::vector<int64_t> recv;
  EXPECT_TRUE(g_comm->AllToAllCounts(std::vector<int64_t>(g_comm->size(), 2), &recv)) << g_comm->error();
  // A failed communicator is left to the process's end, as in the server: its request stays
  // pending, and freeing it after MPI_Finalize (a static's destructor) would abort.
  (void)group.release();
}

}  // namespace
}  // namespace ls::dist

int main(int argc, char** argv) {
  return ls::dist::RunMpiTests(argc, argv, std::chrono::seconds(20), &ls::dist::g_comm);
}
