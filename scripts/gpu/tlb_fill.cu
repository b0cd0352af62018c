// Probes: what one TLB miss brings in. The H100's and H200's first L2-path level is keyed by
// 16 MiB virtual ranges and the second by 32 MiB ones, where Volta and Turing use 2 MiB
// first-level entries (Jia et al. 2018/2019, Table 3.1). The driver's pages are at most
// 2 MiB, so a 16 MiB entry holds eight page translations. Either one miss fills all eight
// (a block of page-table entries is fetched and kept together), or every page's first use
// misses on its own. This probe decides per load:
//   1. flush the level under test with one load in each of many other ranges;
//   2. "cold" pass: visit a few test ranges page by page (one line per 2 MiB page), timing
//      every load; 3. "warm" pass: the same loads again at once.
// Cold minus warm latency of the same load (medians over trials) is its translation cost;
// data stay L2-resident (ld.global.cg, a footprint of a few MiB), so the difference is not
// data. Layouts: pages in order, in reverse, in adjacent ranges (prefetch of the next range?),
// in shuffled 2 MiB VMM chunks, with holes (only pages 0, 2, 5, 7 of each range mapped, each
// its own allocation), and for the second and third levels 32 and 64 MiB ranges in 528 GiB of
// addresses aliased over 4 GiB of 64 MiB chunks, with flushes of the lower, the upper or both
// 32 MiB halves of each 64 MiB range.
// Backs: docs/results/h100-deep.md and h200-deep.md, TLBs: one miss fills the whole 16 MiB
// (level 1) or 32 MiB (level 2); the third level's entries map 32 MiB in two groups by address
// (docs/evidence/2026-11-25-h100-tlb-probes/, docs/evidence/2026-11-25-h200-tlb-probes/).
// Build: nvcc -O2 -arch=sm_90 -o tlb_fill tlb_fill.cu -lcuda
#include <cuda.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

#define CK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { const char* s_ = 0; cuGetErrorName(r_, &s_); \
  fprintf(stderr, "%s failed: %s (line %d)\n", #x, s_ ? s_ : "?", __LINE__); exit(1); } } while (0)
#define RK(x) do { cudaError_t r_ = (x); if (r_ != cudaSuccess) { \
  fprintf(stderr, "%s failed: %s (line %d)\n", #x, cudaGetErrorString(r_), __LINE__); exit(1); } } while (0)

static const unsigned long long MiB = 1ull << 20, GiB = 1ull << 30;
static const unsigned TRIALS = 32, MAX_TEST = 64;

__device__ __forceinline__ unsigned long long ld_cg(const unsigned char* p) {
  unsigned long long v;
  asm volatile("ld.global.cg.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ unsigned clock_now() {
  unsigned t;
  asm volatile("mov.u32 %0, %%clock;" : "=r"(t) :: "memory");
  return t;
}

// at[i] holds next[i]: byte offsets from base.
__global__ void scatter(unsigned char* base, const unsigned long long* at, const unsigned long long* next, unsigned n) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    *reinterpret_cast<unsigned long long*>(base + at[i]) = next[i];
}

// One thread. Per trial: the flush cycle (untimed), then the test cycle twice, timed.
__global__ void probe(const unsigned char* base, unsigned long long flush0, unsigned nflush, unsigned long long test0,
                      unsigned ntest, unsigned* out) {
  __shared__ unsigned lat[TRIALS][2][MAX_TEST];
  __shared__ volatile unsigned long long sink;
  if (threadIdx.x != 0) return;
  unsigned long long j = test0;
  for (unsigned k = 0; k < 2 * ntest; ++k) j = ld_cg(base + j);  // data into the L2
  for (unsigned t = 0; t < TRIALS; ++t) {
    j = flush0;
    for (unsigned k = 0; k < nflush; ++k) j = ld_cg(base + j);
    sink = j;
    j = test0;
    for (unsigned pass = 0; pass < 2; ++pass)
      for (unsigned k = 0; k < ntest; ++k) {
        const unsigned char* p = base + j;
        unsigned t0 = clock_now();
        j = ld_cg(p);
        sink = j;
        unsigned t1 = clock_now();
        lat[t][pass][k] = t1 - t0;
      }
  }
  for (unsigned t = 0; t < TRIALS; ++t)
    for (unsigned pass = 0; pass < 2; ++pass)
      for (unsigned k = 0; k < ntest; ++k) out[(t * 2 + pass) * MAX_TEST + k] = lat[t][pass][k];
  out[TRIALS * 2 * MAX_TEST] = (unsigned)sink;
}

struct Node { unsigned long long va; std::string label; };

static unsigned median(std::vector<unsigned> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Builds both cycles, runs the probe and prints one line per test load. phys maps an offset
// to a physical (chunk, offset) pair: the host refuses layouts where two nodes share a line.
template <class Phys>
static void run(const char* name, CUdeviceptr base, const std::vector<unsigned long long>& flush,
                const std::vector<Node>& test, Phys phys, unsigned* d_out, unsigned long long* d_at,
                unsigned long long* d_next) {
  std::map<std::pair<unsigned long long, unsigned long long>, int> seen;
  std::vector<unsigned long long> at, next;
  auto add_cycle = [&](const std::vector<unsigned long long>& vas) {
    for (size_t i = 0; i < vas.size(); ++i) {
      auto p = phys(vas[i]);
      p.second /= 128;
      if (seen.count(p)) { printf("%s: two nodes share a physical line at 0x%llx\n", name, vas[i]); exit(1); }
      seen[p] = 1;
      at.push_back(vas[i]);
      next.push_back(vas[(i + 1) % vas.size()]);
    }
  };
  std::vector<unsigned long long> tv;
  for (const Node& n : test) tv.push_back(n.va);
  add_cycle(flush);
  add_cycle(tv);
  RK(cudaMemcpy(d_at, at.data(), at.size() * 8, cudaMemcpyHostToDevice));
  RK(cudaMemcpy(d_next, next.data(), next.size() * 8, cudaMemcpyHostToDevice));
  scatter<<<64, 256>>>((unsigned char*)base, d_at, d_next, (unsigned)at.size());
  RK(cudaDeviceSynchronize());
  probe<<<1, 32>>>((const unsigned char*)base, flush[0], (unsigned)flush.size(), tv[0], (unsigned)tv.size(), d_out);
  RK(cudaDeviceSynchronize());
  std::vector<unsigned> out(TRIALS * 2 * MAX_TEST + 1);
  RK(cudaMemcpy(out.data(), d_out, out.size() * 4, cudaMemcpyDeviceToHost));
  printf("== %s: flush %zu loads, %zu test loads, %u trials\n", name, flush.size(), test.size(), TRIALS);
  for (size_t k = 0; k < test.size(); ++k) {
    std::vector<unsigned> cold, warm, diff;
    for (unsigned t = 0; t < TRIALS; ++t) {
      unsigned c = out[(t * 2) * MAX_TEST + k], w = out[(t * 2 + 1) * MAX_TEST + k];
      cold.push_back(c);
      warm.push_back(w);
      diff.push_back(c > w ? c - w : 0);
    }
    std::vector<unsigned> sd = diff;
    std::sort(sd.begin(), sd.end());
    printf("%s %-14s cold p50 %4u warm p50 %4u  cold-warm p25 %4u p50 %4u p75 %4u\n", name, test[k].label.c_str(),
           median(cold), median(warm), sd[TRIALS / 4], sd[TRIALS / 2], sd[3 * TRIALS / 4]);
  }
}

// Test loads: for each range (of `span` bytes starting at range index r), one line in each
// listed 2 MiB page, at a small offset that differs per load.
static std::vector<Node> pages(const std::vector<unsigned long long>& ranges, unsigned long long span,
                               const std::vector<unsigned>& order, unsigned long long extra = 1 * MiB) {
  std::vector<Node> v;
  unsigned i = 0;
  for (auto r : ranges)
    for (auto p : order) {
      char buf[32];
      snprintf(buf, sizeof buf, "r%llu/p%u", r, p);
      v.push_back({r * span + p * 2 * MiB + extra + (++i) * 384, buf});
    }
  return v;
}

// One load in each of `count` ranges of `span` bytes from range `first`, at `offset` plus a
// line that makes every node's physical line distinct in the aliased region too (k / 64
// with the chunk k mod 64 or k / 2 mod 64 tells k apart).
static std::vector<unsigned long long> flush_list(unsigned long long first, unsigned long long count,
                                                  unsigned long long span, unsigned long long offset = 0) {
  std::vector<unsigned long long> v;
  for (unsigned long long k = 0; k < count; ++k) v.push_back((first + k) * span + offset + (k / 64) * 128);
  return v;
}

int main() {
  RK(cudaSetDevice(0));
  RK(cudaFree(0));
  CUdevice dev;
  CK(cuCtxGetDevice(&dev));
  char gpu_name[256] = {0};
  CK(cuDeviceGetName(gpu_name, sizeof gpu_name, dev));
  int clock_khz = 0;
  RK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  printf("%s, clock %d kHz\n", gpu_name, clock_khz);
  unsigned* d_out;
  unsigned long long *d_at, *d_next;
  RK(cudaMalloc(&d_out, (TRIALS * 2 * MAX_TEST + 1) * 4));
  RK(cudaMalloc(&d_at, 20000 * 8));
  RK(cudaMalloc(&d_next, 20000 * 8));
  const unsigned long long R16 = 16 * MiB, R32 = 32 * MiB;
  const std::vector<unsigned> seq8 = {0, 1, 2, 3, 4, 5, 6, 7}, rev8 = {7, 6, 5, 4, 3, 2, 1, 0};
  auto ident = [](unsigned long long va) { return std::make_pair(0ull, va); };

  // 1. A plain cudaMalloc of 4 GiB: 256 ranges of 16 MiB; flush with 64 of them (ranges 128+).
  {
    void* plain = 0;
    RK(cudaMalloc(&plain, 4 * GiB));
    CUdeviceptr b = (CUdeviceptr)plain;
    auto fl = flush_list(128, 64, R16);
    run("plain-seq", b, fl, pages({0, 5, 11, 19}, R16, seq8), ident, d_out, d_at, d_next);
    run("plain-rev", b, fl, pages({2, 7, 13, 23}, R16, rev8), ident, d_out, d_at, d_next);
    run("plain-adjacent", b, fl, pages({40, 41, 42, 43}, R16, {0, 3}), ident, d_out, d_at, d_next);
    run("plain-noflush", b, {fl[0]}, pages({0, 5, 11, 19}, R16, seq8), ident, d_out, d_at, d_next);
    RK(cudaFree(plain));
  }

  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  size_t gran = 0;
  CK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  printf("VMM granularity %zu B\n", gran);
  if (gran != 2 * MiB) { printf("granularity is not 2 MiB: the chunked layouts assume it\n"); return 0; }
  CUmemAccessDesc access = {};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;

  // 2. 4 GiB of separately created 2 MiB chunks, mapped in a shuffled order; in ranges
  // 200..231 only pages 0, 2, 5 and 7 are mapped (holes).
  {
    const unsigned long long n = 2048;
    CUdeviceptr b = 0;
    CK(cuMemAddressReserve(&b, n * gran, 16 * MiB, 0, 0));
    std::vector<CUmemGenericAllocationHandle> h(n);
    for (auto& x : h) CK(cuMemCreate(&x, gran, &prop, 0));
    std::vector<unsigned long long> chunk_of(n, ~0ull);
    const unsigned long long a = 1259;  // coprime with 2048
    for (unsigned long long j = 0; j < n; ++j) {
      const unsigned long long range = j / 8, page = j % 8;
      const bool hole = range >= 200 && range < 232 && !(page == 0 || page == 2 || page == 5 || page == 7);
      if (hole) continue;
      chunk_of[j] = j * a % n;
      CK(cuMemMap(b + j * gran, gran, 0, h[chunk_of[j]], 0));
      CK(cuMemSetAccess(b + j * gran, gran, &access, 1));
    }
    auto phys = [&](unsigned long long va) {
      unsigned long long c = chunk_of[va / gran];
      if (c == ~0ull) { printf("node at 0x%llx is in a hole\n", va); exit(1); }
      return std::make_pair(c, va % gran);
    };
    auto fl = flush_list(128, 64, R16);
    run("chunked-seq", b, fl, pages({0, 5, 11, 19}, R16, seq8), phys, d_out, d_at, d_next);
    run("holes-seq", b, fl, pages({200, 205, 211, 219}, R16, {0, 2, 5, 7}), phys, d_out, d_at, d_next);
    run("holes-from5", b, fl, pages({202, 207, 213, 223}, R16, {5, 7, 0, 2}), phys, d_out, d_at, d_next);
    for (unsigned long long j = 0; j < n; ++j)
      if (chunk_of[j] != ~0ull) CK(cuMemUnmap(b + j * gran, gran));
    for (auto x : h) CK(cuMemRelease(x));
    CK(cuMemAddressFree(b, n * gran));
  }

  // 3. The second and third levels: 528 GiB of addresses, place j of 64 MiB holding chunk
  // j mod 64. Second level: flush with 8192 ranges of 32 MiB (256 GiB, 4096 third-level
  // entries: within its 4339) or 3072 (96 GiB: 1536), test ranges beyond. Third level: flush
  // with 8192 ranges of 64 MiB (512 GiB), then visit pages 0, 1, 8, 9, 16, 17, 24, 25 of a
  // 64 MiB range: page 16 opens the range's second 32 MiB.
  {
    const unsigned long long chunk = 64 * MiB, pool = 64, places = 528 * GiB / chunk;
    CUdeviceptr b = 0;
    CK(cuMemAddressReserve(&b, places * chunk, chunk, 0, 0));
    std::vector<CUmemGenericAllocationHandle> h(pool);
    for (auto& x : h) CK(cuMemCreate(&x, chunk, &prop, 0));
    for (unsigned long long j = 0; j < places; ++j) CK(cuMemMap(b + j * chunk, chunk, 0, h[j % pool], 0));
    CK(cuMemSetAccess(b, places * chunk, &access, 1));
    auto phys = [&](unsigned long long va) { return std::make_pair((va / chunk) % pool, va % chunk); };
    std::vector<unsigned> seq16;
    for (unsigned p = 0; p < 16; ++p) seq16.push_back(p);
    std::vector<unsigned> rev16(seq16.rbegin(), seq16.rend());
    // Flush lines lie below 1 MiB of each range, test lines above it.
    auto fl = flush_list(0, 8192, R32);
    run("alias-l2-seq", b, fl, pages({8192, 8195, 8199, 8204}, R32, seq16), phys, d_out, d_at, d_next);
    run("alias-l2-rev", b, fl, pages({8193, 8197, 8202, 8207}, R32, rev16), phys, d_out, d_at, d_next);
    run("alias-l2-mid", b, flush_list(0, 3072, R32), pages({8192, 8195, 8199, 8204}, R32, seq16), phys, d_out,
        d_at, d_next);
    run("alias-l1only-seq", b, flush_list(0, 64, R32), pages({8192, 8195, 8199, 8204}, R32, seq16), phys, d_out,
        d_at, d_next);
    // Third level. Flushing only the lower 32 MiB of 8192 ranges of 64 MiB, or only the
    // upper, or both halves (16384 ranges of 32 MiB, 512 GiB); then pages 0, 1, 8, 9, 16, 17,
    // 24, 25 of 64 MiB test ranges, or the same in reverse.
    const std::vector<unsigned> l3seq = {0, 1, 8, 9, 16, 17, 24, 25}, l3rev = {31, 30, 23, 22, 15, 14, 7, 6};
    const std::vector<unsigned long long> t3 = {8192, 8195, 8199, 8204}, t3r = {8193, 8197, 8202, 8207};
    run("alias-l3-lowerflush", b, flush_list(0, 8192, chunk), pages(t3, chunk, l3seq), phys, d_out, d_at, d_next);
    run("alias-l3-lowerflush-rev", b, flush_list(0, 8192, chunk), pages(t3r, chunk, l3rev), phys, d_out, d_at,
        d_next);
    run("alias-l3-upperflush", b, flush_list(0, 8192, chunk, R32), pages(t3, chunk, l3seq), phys, d_out, d_at,
        d_next);
    run("alias-l3-fullflush", b, flush_list(0, 16384, R32), pages(t3, chunk, l3seq), phys, d_out, d_at, d_next);
    run("alias-l3-fullflush-rev", b, flush_list(0, 16384, R32), pages(t3r, chunk, l3rev), phys, d_out, d_at, d_next);
    for (unsigned long long j = 0; j < places; ++j) CK(cuMemUnmap(b + j * chunk, chunk));
    for (auto x : h) CK(cuMemRelease(x));
    CK(cuMemAddressFree(b, places * chunk));
  }
  return 0;
}
