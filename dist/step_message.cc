// StepMessage and WorkerReply encoding.
#include "dist/step_message.h"

#include "absl/strings/str_cat.h"
#include "dist/byte_codec.h"

namespace ls::dist {
namespace {

constexpr uint32_t kMessageMagic = 0x4c53504c;  // "LSPL": a leader's plan
constexpr uint32_t kReplyMagic = 0x4c535250;    // "LSRP": a worker's reply

void PutPlacements(ByteWriter& w, const PlacementUpdate& u) {
  w.Put<int64_t>(u.epoch);
  w.Put<uint64_t>(u.layers.size());
  for (const auto& [layer, p] : u.layers) {
    w.Put<int32_t>(layer);
    w.Put<int32_t>(p.num_experts);
    w.Put<int32_t>(p.num_devices);
    w.Put<int32_t>(p.slots_per_device);
    w.PutArray(p.slot_expert);
  }
}

PlacementUpdate GetPlacements(ByteReader& r) {
  PlacementUpdate u;
  u.epoch = r.Get<int64_t>("placement epoch");
  const uint64_t n = r.Get<uint64_t>("placement layer count");
  for (uint64_t i = 0; i < n && r.ok(); ++i) {
    ExpertPlacement p;
    const int32_t layer = r.Get<int32_t>("placement layer");
    p.num_experts = r.Get<int32_t>("placement experts");
    p.num_devices = r.Get<int32_t>("placement devices");
    p.slots_per_device = r.Get<int32_t>("placement slots");
    p.slot_expert = r.GetArray<int32_t>("placement slots' experts");
    if (!r.ok()) break;
    if (p.num_experts < 1 || layer < 0 || !p.Validate().ok()) {
      r.Fail("a placement that does not validate");
      break;
    }
    p.Index();
    u.layers.emplace_back(layer, std::move(p));
  }
  return u;
}

void PutBatch(ByteWriter& w, const StepBatch& b) {
  w.PutArray(b.tokens);
  w.Put<uint64_t>(b.seqs.size());
  for (const StepSequence& s : b.seqs) {
    w.Put<int32_t>(s.num_tokens);
    w.Put<int32_t>(s.start_pos);
    w.PutArray(s.block_table);
    w.Put<uint8_t>(static_cast<uint8_t>((s.all_logits ? 1 : 0) | (s.want_logits ? 2 : 0) | (s.greedy ? 4 : 0) |
                                        (s.greedy_logprob ? 8 : 0)));
    w.Put<int32_t>(s.state_slot);
  }
  w.Put<uint64_t>(b.copies.size());
  for (const CacheCopy& c : b.copies) {
    w.Put<uint8_t>(static_cast<uint8_t>(c.kind));
    w.Put<int32_t>(c.src);
    w.Put<int32_t>(c.dst);
  }
}

StepBatch GetBatch(ByteReader& r) {
  StepBatch b;
  b.tokens = r.GetArray<int32_t>("batch tokens");
  const uint64_t n = r.Get<uint64_t>("batch sequence count");
  if (n > b.tokens.size() + 1) r.Fail("more sequences than tokens");
  int64_t counted = 0;
  for (uint64_t i = 0; i < n && r.ok(); ++i) {
    StepSequence s;
    s.num_tokens = r.Get<int32_t>("sequence tokens");
    s.start_pos = r.Get<int32_t>("sequence start");
    s.block_table = r.GetArray<int32_t>("sequence block table");
    const uint8_t flags = r.Get<uint8_t>("sequence flags");
    s.all_logits = flags & 1;
    s.want_logits = flags & 2;
    s.greedy = flags & 4;
    s.greedy_logprob = flags & 8;
    s.state_slot = r.Get<int32_t>("sequence state slot");
    if (s.num_tokens < 0 || s.start_pos < 0 || flags > 15) r.Fail("a sequence with a negative count or bad flags");
    counted += s.num_tokens;
    b.seqs.push_back(std::move(s));
  }
  if (r.ok() && counted != static_cast<int64_t>(b.tokens.size())) r.Fail("sequence token counts that do not add up");
  const uint64_t copies = r.Get<uint64_t>("batch copy count");
  if (r.ok() && copies > (1u << 24)) r.Fail("more cache copies than a step makes");
  for (uint64_t i = 0; i < copies && r.ok(); ++i) {
    CacheCopy c;
    const uint8_t kind = r.Get<uint8_t>("cache copy kind");
    c.src = r.Get<int32_t>("cache copy source");
    c.dst = r.Get<int32_t>("cache copy destination");
    if (kind > CacheCopy::kBlock || c.src < 0 || c.dst < 0) r.Fail("a cache copy of an unknown kind or a negative id");
    c.kind = static_cast<CacheCopy::Kind>(kind);
    b.copies.push_back(c);
  }
  return b;
}

bool KnownCacheDType(DType d) { return d == DType::kF32 || d == DType::kBF16 || d == DType::kF16; }

}  // namespace

std::string Encode(const StepMessage& m) {
  ByteWriter w;
  w.Put<uint32_t>(kMessageMagic);
  w.Put<uint8_t>(static_cast<uint8_t>(m.kind));
  w.Put<int32_t>(m.cache.num_blocks);
  w.Put<int32_t>(m.cache.block_size);
  w.Put<int32_t>(m.cache.num_state_slots);
  w.Put<uint8_t>(static_cast<uint8_t>(m.cache.dtype));
  PutBatch(w, m.batch);
  w.Put<uint8_t>(m.prepare ? 1 : 0);
  if (m.prepare) PutPlacements(w, *m.prepare);
  w.Put<int64_t>(m.switch_epoch);
  w.Put<uint8_t>((m.want_hidden ? 1 : 0) | (m.want_logits ? 2 : 0));
  return w.Take();
}

absl::StatusOr<StepMessage> DecodeStepMessage(std::string_view bytes) {
  ByteReader r(bytes);
  StepMessage m;
  if (r.Get<uint32_t>("magic") != kMessageMagic) r.Fail("a leader's message (wrong magic number)");
  const uint8_t kind = r.Get<uint8_t>("kind");
  if (kind < static_cast<uint8_t>(StepKind::kStart) || kind > static_cast<uint8_t>(StepKind::kStop))
    r.Fail("a known message kind");
  m.kind = static_cast<StepKind>(kind);
  m.cache.num_blocks = r.Get<int32_t>("cache blocks");
  m.cache.block_size = r.Get<int32_t>("cache block size");
  m.cache.num_state_slots = r.Get<int32_t>("cache state slots");
  m.cache.dtype = static_cast<DType>(r.Get<uint8_t>("cache dtype"));
  if (m.kind == StepKind::kStart && (m.cache.num_blocks < 1 || m.cache.block_size < 1 || m.cache.num_state_slots < 0 ||
                                     !KnownCacheDType(m.cache.dtype)))
    r.Fail("a cache geometry with positive blocks and block size and a float cache type");
  m.batch = GetBatch(r);
  if (r.Get<uint8_t>("placement flag")) m.prepare = GetPlacements(r);
  m.switch_epoch = r.Get<int64_t>("switch epoch");
  const uint8_t reply_flags = r.Get<uint8_t>("reply flags");
  m.want_hidden = (reply_flags & 1) != 0;
  m.want_logits = (reply_flags & 2) != 0;
  if (r.ok() && !r.at_end()) r.Fail("the message's end (bytes left over)");
  if (!r.ok())
    return absl::DataLossError(absl::StrCat("leader's message (", bytes.size(), " bytes): cannot read ", r.error()));
  return m;
}

std::string Encode(const WorkerReply& rep) {
  ByteWriter w;
  w.Put<uint32_t>(kReplyMagic);
  w.PutString(rep.error);
  w.PutArray(rep.logits);
  w.PutArray(rep.hidden);
  w.PutArray(rep.expert_tokens);
  w.PutArray(rep.device_rows);
  w.Put<int64_t>(rep.built_epoch);
  w.Put<int64_t>(rep.built_memory.slot_bytes);
  w.Put<int64_t>(rep.built_memory.redundant_bytes);
  w.Put<double>(rep.exchange_seconds);
  w.Put<int64_t>(rep.pid);
  w.PutString(rep.host);
  return w.Take();
}

absl::StatusOr<WorkerReply> DecodeWorkerReply(std::string_view bytes) {
  ByteReader r(bytes);
  WorkerReply rep;
  if (r.Get<uint32_t>("magic") != kReplyMagic) r.Fail("a worker's reply (wrong magic number)");
  rep.error = r.GetString("error");
  rep.logits = r.GetArray<float>("logits");
  rep.hidden = r.GetArray<float>("hidden rows");
  rep.expert_tokens = r.GetArray<int64_t>("expert token counts");
  rep.device_rows = r.GetArray<int64_t>("device row counts");
  rep.built_epoch = r.Get<int64_t>("built epoch");
  rep.built_memory.slot_bytes = r.Get<int64_t>("slot bytes");
  rep.built_memory.redundant_bytes = r.Get<int64_t>("redundant bytes");
  rep.exchange_seconds = r.Get<double>("exchange seconds");
  rep.pid = r.Get<int64_t>("pid");
  rep.host = r.GetString("host");
  if (r.ok() && !r.at_end()) r.Fail("the reply's end (bytes left over)");
  if (!r.ok())
    return absl::DataLossError(absl::StrCat("worker's reply (", bytes.size(), " bytes): cannot read ", r.error()));
  return rep;
}

}  // namespace ls::dist
