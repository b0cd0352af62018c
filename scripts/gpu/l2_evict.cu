// Probe: the L2's ways, by minimal eviction sets. One SM (SM 0: the first block there of a
// launch that puts one block on every SM) loads a target line T, then a candidate set S of
// lines (all 1,024 threads, each line once), then times T again: a hit (about 300 cycles)
// means S did not evict T, a miss (500+) that it did. Every line is homed in SM 0's own
// L2 partition (the address map: home = parity(address & MASK) xor one bit per 2 MiB
// page, the page's bit learnt from a timed hit on its first line), so far copies play no
// part. Starting from a set that evicts T, group testing (Vila et al., S&P 2019) drops a
// chunk of S whenever T is still evicted without it, until no single line can go: the
// minimal eviction set holds as many lines as T's set has ways (under LRU-like
// replacement), and each of its lines is then checked to be needed. Each test is the
// majority of three launches.
// Prints, per target: the set sizes along the reduction, the final size, whether each line
// is needed, and the final set's byte offsets.
// Backs: the L2's 16 ways and its non-linear set index in docs/results/h100-deep.md and
// h200-deep.md (docs/evidence/2026-11-28-h100-h200-warm-runs-and-l2-ways/).
//   nvcc -O2 -arch=sm_90 -o l2_evict scripts/gpu/l2_evict.cu && ./l2_evict
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__); exit(1); } } while (0)

constexpr int THREADS = 1024;
constexpr uint32_t HIT_BELOW = 420;  // cycles: near hits ~270-320, misses 500+

__device__ __forceinline__ uint32_t smid() { uint32_t s; asm volatile("mov.u32 %0, %%smid;" : "=r"(s)); return s; }
__device__ __forceinline__ uint32_t clk() { uint32_t t; asm volatile("mov.u32 %0, %%clock;" : "=r"(t) :: "memory"); return t; }
__device__ __forceinline__ uint32_t ld_cg(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// mode 0: load T, load S, time T. mode 1: time a hit on each of `n` lines (load, then timed
// load), thread 0 alone, into out[i].
__global__ void __launch_bounds__(THREADS) probe(const uint32_t* base, const uint64_t* lines, uint32_t n,
                                                 uint64_t target, int mode, int* claimed, uint32_t* out) {
  __shared__ int mine;
  __shared__ volatile uint32_t sink;
  if (threadIdx.x == 0) mine = smid() == 0 && atomicCAS(claimed, 0, 1) == 0;
  __syncthreads();
  if (!mine) return;
  if (mode == 1) {
    if (threadIdx.x != 0) return;
    for (uint32_t i = 0; i < n; ++i) {
      const uint32_t* p = base + lines[i] / 4;
      uint32_t v = ld_cg(p);
      sink = v;
      // The buffer holds zeros: the timed load's address depends on the first load, so
      // the two cannot be merged into one.
      const uint32_t* q = p + v;
      uint32_t t0 = clk();
      v = ld_cg(q);
      sink = v;
      uint32_t t1 = clk();
      out[i] = t1 - t0;
    }
    return;
  }
  const uint32_t* t = base + target / 4;
  if (threadIdx.x == 0) sink = ld_cg(t);
  __syncthreads();
  uint32_t acc = 0;
  for (uint32_t i = threadIdx.x; i < n; i += THREADS) acc ^= ld_cg(base + lines[i] / 4);
  if (acc == 0x9e3779b9u) sink = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    uint32_t t0 = clk();
    uint32_t v = ld_cg(t);
    sink = v;
    uint32_t t1 = clk();
    out[0] = t1 - t0;
  }
}

static int sms = 0, smem = 0;
static int* d_claimed;
static uint32_t* d_out;
static uint64_t* d_lines;
static const uint32_t* d_base;
static long long tests = 0;

static uint32_t run(const std::vector<uint64_t>& s, uint64_t target, int mode, bool copy = true) {
  if (copy && !s.empty()) CHECK(cudaMemcpy(d_lines, s.data(), s.size() * 8, cudaMemcpyHostToDevice));
  CHECK(cudaMemset(d_claimed, 0, 4));
  probe<<<2 * sms, THREADS, smem>>>(d_base, d_lines, (uint32_t)s.size(), target, mode, d_claimed, d_out);
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  uint32_t v = 0;
  CHECK(cudaMemcpy(&v, d_out, 4, cudaMemcpyDeviceToHost));
  ++tests;
  return v;
}

// Majority of three: does loading `s` evict `target`?
static bool evicts(const std::vector<uint64_t>& s, uint64_t target) {
  int misses = 0;
  for (int k = 0; k < 3; ++k) misses += run(s, target, 0, k == 0) >= HIT_BELOW;
  return misses >= 2;
}

static int parity(uint64_t x) { return __builtin_popcountll(x) & 1; }

int main(int argc, char** argv) {
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CHECK(cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
  smem -= 2048;
  CHECK(cudaFuncSetAttribute(probe, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  const bool h200 = strstr(prop.name, "H200") != nullptr;
  const uint64_t mask = h200 ? 0xab000 : 0xb3000;
  const size_t bytes = 512ull << 20;
  uint32_t* base;
  CHECK(cudaMalloc(&base, bytes));
  CHECK(cudaMemset(base, 0, bytes));
  d_base = base;
  CHECK(cudaMalloc(&d_claimed, 4));
  CHECK(cudaMalloc(&d_out, 4096 * 4));
  const size_t max_lines = bytes / 128;
  CHECK(cudaMalloc(&d_lines, max_lines * 8));
  printf("%s, L2 %d bytes, mask 0x%llx\n", prop.name, prop.l2CacheSize, (unsigned long long)mask);
  // Each 2 MiB page's bit: a hit on its first line, near or far from SM 0.
  const size_t pages = bytes >> 21;
  std::vector<uint64_t> firsts(pages);
  for (size_t p = 0; p < pages; ++p) firsts[p] = p << 21;
  CHECK(cudaMemcpy(d_lines, firsts.data(), pages * 8, cudaMemcpyHostToDevice));
  CHECK(cudaMemset(d_claimed, 0, 4));
  std::vector<uint32_t> hit(pages);
  probe<<<2 * sms, THREADS, smem>>>(d_base, d_lines, (uint32_t)pages, 0, 1, d_claimed, d_out);
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaMemcpy(hit.data(), d_out, pages * 4, cudaMemcpyDeviceToHost));
  const uintptr_t va = (uintptr_t)base;
  std::vector<int> page_bit(pages);
  int near_pages = 0;
  for (size_t p = 0; p < pages; ++p) {
    const int far = hit[p] >= 380;
    page_bit[p] = far ^ parity((va + (p << 21)) & mask);
    near_pages += !far;
  }
  printf("pages: %zu, first line near on %d; hit cycles of the first: %u %u %u %u\n", pages, near_pages, hit[0],
         hit[1], hit[2], hit[3]);
  // Every near line, in random order.
  std::vector<uint64_t> near;
  for (size_t l = 0; l < max_lines; ++l) {
    const uint64_t off = (uint64_t)l * 128;
    if ((parity((va + off) & mask) ^ page_bit[off >> 21]) == 0) near.push_back(off);
  }
  std::mt19937_64 rng(2026);
  std::shuffle(near.begin(), near.end(), rng);
  printf("near lines: %zu (%.1f MiB)\n", near.size(), near.size() * 128.0 / 1048576);
  // Check the classification: hits on 256 near lines.
  {
    std::vector<uint64_t> sample(near.begin(), near.begin() + 256);
    CHECK(cudaMemcpy(d_lines, sample.data(), 256 * 8, cudaMemcpyHostToDevice));
    CHECK(cudaMemset(d_claimed, 0, 4));
    probe<<<2 * sms, THREADS, smem>>>(d_base, d_lines, 256, 0, 1, d_claimed, d_out);
    CHECK(cudaDeviceSynchronize());
    std::vector<uint32_t> h(256);
    CHECK(cudaMemcpy(h.data(), d_out, 256 * 4, cudaMemcpyDeviceToHost));
    int ok = 0;
    for (uint32_t v : h) ok += v < 380;
    std::sort(h.begin(), h.end());
    printf("classification check: %d of 256 near lines hit below 380 cycles (p5 %u p50 %u p95 %u)\n", ok, h[12],
           h[128], h[243]);
  }
  const int targets = argc > 1 ? atoi(argv[1]) : 4;
  const size_t start = std::min<size_t>(near.size() - targets, (size_t)((prop.l2CacheSize / 128) * 1.0));
  for (int k = 0; k < targets; ++k) {
    const uint64_t target = near[near.size() - 1 - k];
    std::vector<uint64_t> s(near.begin(), near.begin() + start);
    printf("\ntarget 0x%llx: |S| %zu evicts %d (alone: T %u cycles)\n", (unsigned long long)target, s.size(),
           (int)evicts(s, target), run({}, target, 0));
    if (!evicts(s, target)) { printf("  the whole set does not evict it; skipped\n"); continue; }
    const long long before = tests;
    const int G = 32;
    int stalls = 0;
    while (s.size() > 1 && tests - before < 6000) {
      bool removed = false;
      const size_t chunk = (s.size() + G - 1) / G;
      for (size_t c = 0; c * chunk < s.size();) {
        std::vector<uint64_t> rest;
        rest.reserve(s.size());
        for (size_t i = 0; i < s.size(); ++i)
          if (i / chunk != c) rest.push_back(s[i]);
        if (rest.size() < s.size() && evicts(rest, target)) {
          s.swap(rest);
          removed = true;  // the chunk numbering now refers to the smaller set: same c again
        } else {
          ++c;
        }
        if (s.size() <= 1) break;
      }
      printf("  |S| %zu\n", s.size());
      if (chunk == 1) break;
      // A pass that removed nothing from a large set: once more (a noisy test), then stop.
      if (!removed && ++stalls > 1) break;
    }
    if (s.size() > 64) {
      printf("  reduction stalled at %zu lines after %lld tests\n", s.size(), tests - before);
      continue;
    }
    int needed = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      std::vector<uint64_t> rest;
      for (size_t j = 0; j < s.size(); ++j)
        if (j != i) rest.push_back(s[j]);
      needed += !evicts(rest, target);
    }
    std::sort(s.begin(), s.end());
    printf("  minimal eviction set: %zu lines, %d of them needed each; %lld tests\n  offsets:", s.size(), needed,
           tests - before);
    for (uint64_t o : s) printf(" 0x%llx", (unsigned long long)o);
    printf("\n  target xor offsets:");
    for (uint64_t o : s) printf(" 0x%llx", (unsigned long long)(o ^ target));
    printf("\n");
    fflush(stdout);
  }
  return 0;
}
