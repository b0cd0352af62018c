// Probes: the first translation level on the L2 path, by the order of the same lines. A
// sequential walk at a stride below an entry's coverage touches each entry's region several
// times in a row, so at most one load in (coverage / stride) misses and p5/p50 cannot rise.
// This probe walks the same nodes in a *grouped* order too: with g nodes per group of
// g x stride bytes, position p of the cycle visits node (p mod R) x g + p / R (R = nodes / g
// groups), so consecutive loads are in different groups and a group comes back only after
// all R others. If entries cover g x stride bytes (16 MiB: g = 8 at 2 MiB), grouped walks
// rise at R = 17 groups at every stride; sequential ones (g = 1) at those node counts do not.
// Both in a plain cudaMalloc and in shuffled 2 MiB VMM chunks (physically scattered: a rise
// there is keyed by virtual address). Prints p5/p25/p50/p75/p95 cycles per walk.
// Backs: the second method for memtopo's TLB level 1 in docs/results/h100-deep.md and
// h200-deep.md (16 entries, each an aligned 16 MiB of virtual addresses;
// docs/evidence/2026-11-25-h100-tlb-probes/, docs/evidence/2026-11-25-h200-tlb-probes/).
// Build: nvcc -O2 -arch=sm_90 -o tlb_regions tlb_regions.cu -lcuda
#include <cuda.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { const char* s_ = 0; cuGetErrorName(r_, &s_); \
  fprintf(stderr, "%s failed: %s (line %d)\n", #x, s_ ? s_ : "?", __LINE__); exit(1); } } while (0)
#define RK(x) do { cudaError_t r_ = (x); if (r_ != cudaSuccess) { \
  fprintf(stderr, "%s failed: %s (line %d)\n", #x, cudaGetErrorString(r_), __LINE__); exit(1); } } while (0)

static const unsigned STEPS = 512;

// The node visited at position p of the cycle: group p mod R, member p / R.
__host__ __device__ inline unsigned long long node_at(unsigned long long p, unsigned long long groups,
                                                      unsigned long long g) {
  return (p % groups) * g + p / groups;
}

__global__ void init_chain(unsigned* base, unsigned long long nodes, unsigned long long g,
                           unsigned long long stride_lines) {
  const unsigned long long groups = nodes / g;
  for (unsigned long long p = blockIdx.x * blockDim.x + threadIdx.x; p < nodes; p += gridDim.x * blockDim.x) {
    unsigned long long cur = node_at(p, groups, g);
    unsigned long long nxt = node_at(p + 1 == nodes ? 0 : p + 1, groups, g);
    base[cur * stride_lines * 32] = (unsigned)(nxt * stride_lines);
  }
}

__device__ __forceinline__ unsigned ld_cg(const unsigned* p) {
  unsigned v;
  asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ unsigned clock_now() {
  unsigned t;
  asm volatile("mov.u32 %0, %%clock;" : "=r"(t) :: "memory");
  return t;
}

// One thread: two warm passes over the cycle, then STEPS timed loads; each loaded value is
// consumed (stored to a volatile shared variable) before the second clock read.
__global__ void walk(const unsigned* base, unsigned long long warm, unsigned* out_lat, unsigned* out_end) {
  __shared__ volatile unsigned sink;
  __shared__ unsigned lat[STEPS];
  if (threadIdx.x != 0) return;
  unsigned long long j = 0;
  for (unsigned long long k = 0; k < warm; ++k) j = ld_cg(base + j * 32);
  for (unsigned k = 0; k < STEPS; ++k) {
    const unsigned* p = base + j * 32;
    unsigned t0 = clock_now();
    j = ld_cg(p);
    sink = (unsigned)j;
    unsigned t1 = clock_now();
    lat[k] = t1 - t0;
  }
  for (unsigned k = 0; k < STEPS; ++k) out_lat[k] = lat[k];
  *out_end = (unsigned)j + sink;
}

static unsigned long long step_bytes(unsigned long long stride) {
  unsigned long long lines = stride / 128;
  for (unsigned long long m = 1;; m += 2) {
    unsigned long long l = lines + m;
    if (l % 3 && l % 5 && l % 7 && l % 11 && l % 13) return l * 128;
  }
}

struct Walk { unsigned long long stride; unsigned long long g; unsigned long long groups; };

static void run(const char* what, CUdeviceptr base, unsigned long long bytes, unsigned* d_lat, unsigned* d_end) {
  const unsigned long long MiB = 1ull << 20;
  std::vector<Walk> walks;
  auto add = [&](unsigned long long stride, unsigned long long g, std::vector<unsigned long long> groups) {
    for (auto r : groups) walks.push_back({stride, g, r});
  };
  const std::vector<unsigned long long> around16 = {8, 15, 16, 17, 18, 24, 32, 64};
  // Grouped by 16 MiB at 64 KiB .. 8 MiB: should rise at 17 groups.
  add(64 << 10, 256, {15, 16, 17, 18, 32});
  add(2 * MiB, 8, around16);
  add(4 * MiB, 4, around16);
  add(8 * MiB, 2, around16);
  // Sequential at the same node counts: each 16 MiB region is touched several times in a row.
  add(2 * MiB, 1, {120, 128, 136, 144, 256, 512});
  add(8 * MiB, 1, {30, 32, 34, 36, 64, 128});
  add(16 * MiB, 1, {15, 16, 17, 18, 24, 64, 256, 1024, 4096});
  // Grouped by 8 MiB at 2 MiB (two 8 MiB groups per 16 MiB region, visited one after the
  // other): if entries cover 16 MiB, half the loads miss from 17 regions = 34 groups.
  add(2 * MiB, 4, {16, 32, 33, 34, 36, 64});
  // Grouped by 32 MiB at 2 MiB: each pass touches R regions of 16 MiB: rise at R = 17.
  add(2 * MiB, 16, {8, 9, 16, 17, 18});
  // Far groups: the second level, if any, with every load in another 16 MiB region.
  add(2 * MiB, 8, {128, 256, 512, 1024, 2048});
  for (const Walk& w : walks) {
    const unsigned long long step = step_bytes(w.stride);
    const unsigned long long nodes = w.g * w.groups;
    if (nodes * step > bytes) continue;
    const unsigned long long stride_lines = step / 128;
    init_chain<<<(unsigned)std::min<unsigned long long>(4096, (nodes + 255) / 256), 256>>>((unsigned*)base, nodes, w.g,
                                                                                           stride_lines);
    walk<<<1, 32>>>((const unsigned*)base, 2 * nodes, d_lat, d_end);
    RK(cudaDeviceSynchronize());
    std::vector<unsigned> lat(STEPS);
    RK(cudaMemcpy(lat.data(), d_lat, STEPS * 4, cudaMemcpyDeviceToHost));
    std::sort(lat.begin(), lat.end());
    auto q = [&](unsigned pct) { return lat[std::min<unsigned>(STEPS - 1, STEPS * pct / 100)]; };
    printf("%s stride %llu KiB group %llu (%llu KiB) groups %llu nodes %llu span %.2f GiB: p5 %u p25 %u p50 %u p75 %u p95 %u\n",
           what, w.stride >> 10, w.g, (w.g * w.stride) >> 10, w.groups, nodes, nodes * (double)step / (1ull << 30),
           q(5), q(25), q(50), q(75), q(95));
  }
}

int main() {
  RK(cudaSetDevice(0));
  RK(cudaFree(0));
  CUdevice dev;
  CK(cuCtxGetDevice(&dev));
  size_t free_b = 0, total_b = 0;
  RK(cudaMemGetInfo(&free_b, &total_b));
  // 72 GiB are enough for every walk above (the largest: 4096 x 16 MiB).
  unsigned long long bytes = std::min<unsigned long long>(72ull << 30,
      (free_b - std::max<size_t>(4ull << 30, total_b / 16)) & ~((1ull << 30) - 1));
  printf("device memory %.2f GiB, free %.2f GiB, region %.0f GiB\n", total_b / 1073741824.0, free_b / 1073741824.0,
         bytes / 1073741824.0);
  unsigned *d_lat, *d_end;
  RK(cudaMalloc(&d_lat, STEPS * 4));
  RK(cudaMalloc(&d_end, 4));

  void* plain = 0;
  RK(cudaMalloc(&plain, bytes));
  printf("plain cudaMalloc at %p\n", plain);
  run("plain", (CUdeviceptr)plain, bytes, d_lat, d_end);
  RK(cudaFree(plain));

  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  size_t gran = 0;
  CK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  unsigned long long n = bytes / gran;
  std::vector<CUmemGenericAllocationHandle> handles(n);
  for (unsigned long long k = 0; k < n; ++k) CK(cuMemCreate(&handles[k], gran, &prop, 0));
  CUdeviceptr base = 0;
  CK(cuMemAddressReserve(&base, n * gran, gran, 0, 0));
  unsigned long long a = (unsigned long long)(n * 0.618);
  auto gcd = [](unsigned long long x, unsigned long long y) { while (y) { unsigned long long t = x % y; x = y; y = t; } return x; };
  while (gcd(a, n) != 1 || a <= 1 || a >= n - 1) ++a;
  for (unsigned long long j = 0; j < n; ++j) CK(cuMemMap(base + j * gran, gran, 0, handles[j * a % n], 0));
  for (auto h : handles) CK(cuMemRelease(h));
  CUmemAccessDesc access = {};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CK(cuMemSetAccess(base, n * gran, &access, 1));
  printf("chunked: %llu chunks of %zu B (the minimum granularity), order j*%llu mod n, at 0x%llx\n", n, gran, a,
         (unsigned long long)base);
  run("chunked", base, n * gran, d_lat, d_end);
  for (unsigned long long j = 0; j < n; ++j) CK(cuMemUnmap(base + j * gran, gran));
  CK(cuMemAddressFree(base, n * gran));
  return 0;
}
