// Probes: which L2 partition is home to each line, seen from chosen SMs, and the constant
// caches' latency from every SM.
//
// Home map. A line's home partition holds it; a partition that reads or writes a line homed
// in another keeps a copy, so each timing starts from one writer SM: its block writes whole
// lines as a cyclic chain in random order (leaving the lines only at home and in the writer's
// partition), then one thread of the reader SM chases the chain with `ld.global.cg` (L2, not
// L1), timing every load: near (~260 cycles) or far (~470). A reader in the writer's
// partition finds every line near; one in the other partition finds far exactly the lines
// homed in the writer's.
// 1. Survey: SM 0 writes 1 MiB, every SM reads it (`survey,<sm>,<far share>`): the SMs of
//    SM 0's partition and of the other.
// 2. Map: every 128-byte line of two allocations (32 MiB each, 1 GiB between them, chunks
//    of 8 MiB), for four (writer, reader) pairs: SM 0 and an SM of the other partition both
//    ways, then two other SMs both ways.
// 3. Sectors: the four 32-byte sectors of the first MiB's lines, each in its own pass.
// Files: `survey.bin`, `home-0.bin`, `home-1.bin`, `sectors.bin`, each u64 base address,
// u32 nodes, u32 passes, per pass a u32 tag (writer << 16 | reader; the reader for the
// survey), then u16 cycles [pass][node].
//
// Constant caches per SM: one thread on each SM in turn chases a `__constant__` chain with
// nodes 64 B apart over 32 KiB (misses the constant L1, hits the L1.5) and over 512 B
// (constant L1 hits); prints `const,<sm>,<l1.5 median>,<l1 median>` (cycles with the clock
// overhead).
//
//   nvcc -O2 -arch=sm_90 -o l2_home scripts/gpu/l2_home.cu && ./l2_home OUTDIR
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__); exit(1); } } while (0)

constexpr size_t ALLOC = 32u << 20;
constexpr size_t CHUNK = 8u << 20;
constexpr uint32_t LINE = 128;
constexpr int CONST_WORDS = 16384;  // 64 KiB, the whole bank
__constant__ uint32_t cbank[CONST_WORDS];

__device__ __forceinline__ uint32_t ld_cg(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ uint32_t smid() { uint32_t s; asm volatile("mov.u32 %0, %%smid;" : "=r"(s)); return s; }
__device__ __forceinline__ uint32_t clk() { uint32_t t; asm volatile("mov.u32 %0, %%clock;" : "=r"(t) :: "memory"); return t; }

// The block on SM `who` writes every node's whole line: chain[off[i]] = off[i + 1] (word
// offsets, cyclic), the line's other words 0. One warp per line, so every store is a whole
// line and the L2 holds it whole (a partial write leaves the rest to be read from memory).
__global__ void writer(uint32_t* chain, const uint32_t* off, uint32_t n, uint32_t who) {
  if (smid() != who) return;
  const uint32_t lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  for (uint32_t i = warp; i < n; i += warps) {
    uint32_t node = off[i], line = node & ~31u, word = line + lane;
    chain[word] = word == node ? off[(i + 1) % n] : 0u;
  }
}

// One block per SM (the opt-in shared memory); the one on `target` chases n nodes from
// `start`, out[i] = cycles of the i-th load.
__global__ void probe(const uint32_t* chain, uint32_t start, uint32_t n, uint32_t target,
                      uint16_t* out) {
  __shared__ volatile uint32_t sink;
  if (threadIdx.x != 0 || smid() != target) return;
  uint32_t j = start;
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t t0 = clk();
    j = ld_cg(chain + j);
    sink = j;
    uint32_t t1 = clk();
    uint32_t d = t1 - t0;
    out[i] = (uint16_t)(d > 65535 ? 65535 : d);
  }
}

__global__ void const_probe(uint32_t target, uint32_t start_far, uint32_t nfar,
                            uint32_t start_near, uint32_t nnear, uint32_t* out) {
  __shared__ uint32_t lat[1024];
  __shared__ volatile uint32_t sink;
  if (threadIdx.x != 0 || smid() != target) return;
  uint32_t j = start_far;
  for (int p = 0; p < 3; ++p) for (uint32_t i = 0; i < nfar; ++i) j = cbank[j];
  for (uint32_t i = 0; i < nfar; ++i) {
    uint32_t t0 = clk(); j = cbank[j]; sink = j; uint32_t t1 = clk(); lat[i] = t1 - t0;
  }
  for (uint32_t i = 0; i < nfar; ++i) out[i] = lat[i];
  j = start_near;
  for (int p = 0; p < 3; ++p) for (uint32_t i = 0; i < nnear; ++i) j = cbank[j];
  for (uint32_t i = 0; i < nnear; ++i) {
    uint32_t t0 = clk(); j = cbank[j]; sink = j; uint32_t t1 = clk(); lat[i] = t1 - t0;
  }
  for (uint32_t i = 0; i < nnear; ++i) out[nfar + i] = lat[i];
}

static uint32_t median(std::vector<uint32_t> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

// Times every node of `offs` (word offsets inside `chain`): pass k written by writers[k],
// read by readers[k]; res[k * stride + base_index + i] = cycles of node i.
static void home_pass(uint32_t* chain, const std::vector<uint32_t>& offs, const std::vector<uint32_t>& writers,
                      const std::vector<uint32_t>& readers, int nsm, int smem, std::mt19937_64& rng,
                      std::vector<uint16_t>& res, size_t stride, size_t base_index) {
  uint32_t n = offs.size();
  std::vector<uint32_t> order(n);
  for (uint32_t i = 0; i < n; ++i) order[i] = i;
  uint32_t* d_off;
  uint16_t* d_out;
  CHECK(cudaMalloc(&d_off, n * 4));
  CHECK(cudaMalloc(&d_out, n * 2));
  std::vector<uint32_t> perm(n);
  std::vector<uint16_t> lat(n);
  for (size_t k = 0; k < readers.size(); ++k) {
    std::shuffle(order.begin(), order.end(), rng);
    for (uint32_t i = 0; i < n; ++i) perm[i] = offs[order[i]];
    CHECK(cudaMemcpy(d_off, perm.data(), n * 4, cudaMemcpyHostToDevice));
    writer<<<nsm, 1024, smem>>>(chain, d_off, n, writers[k]);
    CHECK(cudaGetLastError());
    probe<<<nsm, 32, smem>>>(chain, perm[0], n, readers[k], d_out);
    CHECK(cudaGetLastError());
    CHECK(cudaMemcpy(lat.data(), d_out, n * 2, cudaMemcpyDeviceToHost));
    for (uint32_t i = 0; i < n; ++i) res[k * stride + base_index + order[i]] = lat[i];
  }
  CHECK(cudaFree(d_off));
  CHECK(cudaFree(d_out));
}

static void write_bin(const std::string& path, uint64_t base, uint32_t nodes, const std::vector<uint32_t>& tags,
                      const std::vector<uint16_t>& res) {
  FILE* f = fopen(path.c_str(), "wb");
  if (!f) { perror(path.c_str()); exit(1); }
  uint32_t passes = tags.size();
  fwrite(&base, 8, 1, f); fwrite(&nodes, 4, 1, f); fwrite(&passes, 4, 1, f);
  fwrite(tags.data(), 4, passes, f);
  fwrite(res.data(), 2, res.size(), f);
  fclose(f);
}

int main(int argc, char** argv) {
  if (argc < 2) { fprintf(stderr, "usage: l2_home OUTDIR\n"); return 2; }
  std::string dir = argv[1];
  int nsm = 0, smem = 0;
  CHECK(cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, 0));
  CHECK(cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
  smem -= 8192;
  CHECK(cudaFuncSetAttribute(probe, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  CHECK(cudaFuncSetAttribute(writer, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  CHECK(cudaFuncSetAttribute(const_probe, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  std::mt19937_64 rng(20261128);

  // Two allocations with 1 GiB between them.
  uint32_t *a0, *spacer, *a1;
  CHECK(cudaMalloc(&a0, ALLOC));
  CHECK(cudaMalloc(&spacer, 1u << 30));
  CHECK(cudaMalloc(&a1, ALLOC));
  uint32_t* allocs[2] = {a0, a1};
  const uint32_t lines = ALLOC / LINE, chunk_lines = CHUNK / LINE;

  // Survey: SM 0 writes the first MiB's lines, every SM reads them: the far share tells
  // which SMs share SM 0's partition.
  std::vector<uint32_t> all(nsm), zeros(nsm, 0);
  for (int i = 0; i < nsm; ++i) all[i] = i;
  const uint32_t survey_lines = (1u << 20) / LINE;
  std::vector<uint16_t> survey((size_t)nsm * survey_lines);
  {
    std::vector<uint32_t> offs(survey_lines);
    for (uint32_t i = 0; i < survey_lines; ++i) offs[i] = i * (LINE / 4);
    home_pass(a0, offs, zeros, all, nsm, smem, rng, survey, survey_lines, 0);
  }
  write_bin(dir + "/survey.bin", (uint64_t)a0, survey_lines, all, survey);
  std::vector<uint32_t> same, other;
  for (int s = 0; s < nsm; ++s) {
    uint32_t far = 0;
    for (uint32_t i = 0; i < survey_lines; ++i) far += survey[(size_t)s * survey_lines + i] > 380;
    double share = (double)far / survey_lines;
    printf("survey,%d,%.3f\n", s, share);
    (share > 0.25 ? other : same).push_back(s);
  }
  if (same.size() < 2 || other.size() < 2) { fprintf(stderr, "one partition only\n"); return 1; }
  // Pairs (writer, reader): SM 0 and the first SM of the other group both ways, then two
  // other SMs of each group both ways.
  uint32_t x0 = 0, y0 = other[0], x1 = same[same.size() / 2], y1 = other[other.size() / 2];
  std::vector<uint32_t> writers = {x0, y0, x1, y1}, readers = {y0, x0, y1, x1};
  fprintf(stderr, "pairs: %u->%u %u->%u %u->%u %u->%u\n", x0, y0, y0, x0, x1, y1, y1, x1);
  for (int a = 0; a < 2; ++a) {
    std::vector<uint16_t> res((size_t)readers.size() * lines);
    for (uint32_t c = 0; c < lines / chunk_lines; ++c) {
      std::vector<uint32_t> offs(chunk_lines);
      for (uint32_t i = 0; i < chunk_lines; ++i) offs[i] = (c * chunk_lines + i) * (LINE / 4);
      home_pass(allocs[a], offs, writers, readers, nsm, smem, rng, res, lines, (size_t)c * chunk_lines);
    }
    std::vector<uint32_t> tag;
    for (size_t k = 0; k < readers.size(); ++k) tag.push_back(writers[k] << 16 | readers[k]);
    write_bin(dir + "/home-" + std::to_string(a) + ".bin", (uint64_t)allocs[a], lines, tag, res);
    fprintf(stderr, "allocation %d at %p done\n", a, (void*)allocs[a]);
  }
  // Sectors 0..3 of the first MiB's lines, each sector in its own pass, both ways.
  {
    const uint32_t n = (1u << 20) / LINE;
    std::vector<uint32_t> w2 = {x0, y0}, r2 = {y0, x0}, tag = {x0 << 16 | y0, y0 << 16 | x0};
    std::vector<uint16_t> res(2 * 4 * (size_t)n);
    for (uint32_t s = 0; s < 4; ++s) {
      std::vector<uint32_t> offs(n);
      for (uint32_t i = 0; i < n; ++i) offs[i] = i * (LINE / 4) + s * 8;
      home_pass(a0, offs, w2, r2, nsm, smem, rng, res, 4 * n, (size_t)s * n);
    }
    write_bin(dir + "/sectors.bin", (uint64_t)a0, 4 * n, tag, res);
  }
  // Constant caches per SM.
  {
    std::vector<uint32_t> host(CONST_WORDS, 0);
    const uint32_t nfar = (32u << 10) / 64, nnear = 8;  // 32 KiB and 512 B at 64 B
    std::vector<uint32_t> order(nfar);
    for (uint32_t i = 0; i < nfar; ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    for (uint32_t i = 0; i < nfar; ++i) host[order[i] * 16] = order[(i + 1) % nfar] * 16;
    // The near chain lives in the last 512 B (words 16256..).
    const uint32_t nb = CONST_WORDS - nnear * 16;
    for (uint32_t i = 0; i < nnear; ++i) host[nb + i * 16] = nb + ((i + 1) % nnear) * 16;
    CHECK(cudaMemcpyToSymbol(cbank, host.data(), CONST_WORDS * 4));
    uint32_t* d_out;
    CHECK(cudaMalloc(&d_out, (nfar + nnear) * 4));
    std::vector<uint32_t> out(nfar + nnear);
    for (int s = 0; s < nsm; ++s) {
      const_probe<<<nsm, 32, smem>>>(s, order[0] * 16, nfar, nb, nnear, d_out);
      CHECK(cudaGetLastError());
      CHECK(cudaMemcpy(out.data(), d_out, out.size() * 4, cudaMemcpyDeviceToHost));
      std::vector<uint32_t> far(out.begin(), out.begin() + nfar), near(out.begin() + nfar, out.end());
      printf("const,%d,%u,%u\n", s, median(far), median(near));
    }
  }
  return 0;
}
