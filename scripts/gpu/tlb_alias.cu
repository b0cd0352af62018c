// Probes: translation levels beyond the addresses one GPU's memory lets a walk span.
// Virtual address space is not bounded by memory: this program reserves RESERVE bytes of
// virtual addresses and maps a pool of POOL physical chunks into it over and over (place j
// holds chunk j mod POOL, so every place is backed), then walks the L2 path (ld.global.cg,
// one thread, cyclic chase) at strides of 4 MiB to 1 GiB, in address order and grouped, up
// to the whole reservation. Two nodes would share a physical line only if their places hold
// the same chunk at the same offset; the host checks that no two do before each walk.
// Prints p5/p25/p50/p75/p95 and the mean per walk.
// Backs: the second method for memtopo's TLB levels 2 and 3 in docs/results/h100-deep.md and
// h200-deep.md (flat to 2048 ranges of 32 MiB and complete at 2304; the third level flat at
// 4096 ranges of 64 MiB and complete at 4608; docs/evidence/2026-11-25-h100-tlb-probes/,
// docs/evidence/2026-11-25-h200-tlb-probes/).
// Build: nvcc -O2 -arch=sm_90 -o tlb_alias tlb_alias.cu -lcuda
#include <cuda.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <utility>
#include <vector>

#define CK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { const char* s_ = 0; cuGetErrorName(r_, &s_); \
  fprintf(stderr, "%s failed: %s (line %d)\n", #x, s_ ? s_ : "?", __LINE__); exit(1); } } while (0)
#define RK(x) do { cudaError_t r_ = (x); if (r_ != cudaSuccess) { \
  fprintf(stderr, "%s failed: %s (line %d)\n", #x, cudaGetErrorString(r_), __LINE__); exit(1); } } while (0)

static const unsigned STEPS = 512;
static const unsigned long long RESERVE = 992ull << 30;   // virtual addresses
static const unsigned long long CHUNK = 64ull << 20;      // one physical chunk
static const unsigned long long POOL = 64;                // 4 GiB of physical chunks

// The node at position p of the cycle: group p mod R, member p / R (R = nodes / g).
__host__ __device__ inline unsigned long long node_at(unsigned long long p, unsigned long long groups,
                                                      unsigned long long g) {
  return (p % groups) * g + p / groups;
}

// Position p's node holds the next position's node index (64-bit).
__global__ void init_chain(unsigned char* base, unsigned long long nodes, unsigned long long g,
                           unsigned long long step) {
  const unsigned long long groups = nodes / g;
  for (unsigned long long p = blockIdx.x * blockDim.x + threadIdx.x; p < nodes; p += gridDim.x * blockDim.x) {
    unsigned long long cur = node_at(p, groups, g);
    unsigned long long next = node_at(p + 1 == nodes ? 0 : p + 1, groups, g);
    *reinterpret_cast<unsigned long long*>(base + cur * step) = next;
  }
}

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

__global__ void walk(const unsigned char* base, unsigned long long step, unsigned long long warm, unsigned* out_lat,
                     unsigned long long* out_end) {
  __shared__ volatile unsigned long long sink;
  __shared__ unsigned lat[STEPS];
  if (threadIdx.x != 0) return;
  unsigned long long j = 0;
  for (unsigned long long k = 0; k < warm; ++k) j = ld_cg(base + j * step);
  for (unsigned k = 0; k < STEPS; ++k) {
    const unsigned char* p = base + j * step;
    unsigned t0 = clock_now();
    j = ld_cg(p);
    sink = j;
    unsigned t1 = clock_now();
    lat[k] = t1 - t0;
  }
  for (unsigned k = 0; k < STEPS; ++k) out_lat[k] = lat[k];
  *out_end = j + sink;
}

static unsigned long long step_bytes(unsigned long long stride) {
  unsigned long long lines = stride / 128;
  for (unsigned long long m = 1;; m += 2) {
    unsigned long long l = lines + m;
    if (l % 3 && l % 5 && l % 7 && l % 11 && l % 13) return l * 128;
  }
}

int main() {
  RK(cudaSetDevice(0));
  RK(cudaFree(0));
  CUdevice dev;
  CK(cuCtxGetDevice(&dev));
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  size_t gran = CHUNK;
  unsigned* d_lat;
  unsigned long long* d_end;
  RK(cudaMalloc(&d_lat, STEPS * 4));
  RK(cudaMalloc(&d_end, 8));
  std::vector<CUmemGenericAllocationHandle> pool(POOL);
  for (auto& h : pool) CK(cuMemCreate(&h, gran, &prop, 0));
  CUdeviceptr base = 0;
  CK(cuMemAddressReserve(&base, RESERVE, 1ull << 30, 0, 0));
  // (the reservation is a multiple of CHUNK)
  const unsigned long long places = RESERVE / gran;
  for (unsigned long long j = 0; j < places; ++j) CK(cuMemMap(base + j * gran, gran, 0, pool[j % POOL], 0));
  CUmemAccessDesc access = {};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  // Access in 16 GiB pieces: over 1 TiB at once the driver answered out of memory (H100,
  // driver 580: granting access to 1008 GiB used up the device memory); the walks use what
  // was granted. The free memory before and after says what the mappings cost.
  size_t free0 = 0, total0 = 0;
  RK(cudaMemGetInfo(&free0, &total0));
  unsigned long long usable = 0;
  const unsigned long long piece = 16ull << 30;
  for (; usable < RESERVE; usable += piece) {
    CUresult r = cuMemSetAccess(base + usable, piece, &access, 1);
    if (r != CUDA_SUCCESS) {
      const char* name = 0;
      cuGetErrorName(r, &name);
      printf("cuMemSetAccess at %.0f GiB: %s; walking the first %.0f GiB\n", usable / 1073741824.0,
             name ? name : "?", usable / 1073741824.0);
      break;
    }
  }
  size_t free1 = 0;
  RK(cudaMemGetInfo(&free1, &total0));
  printf("granting access used %.2f GiB of device memory (%.1f KiB per GiB of addresses)\n",
         (free0 - free1) / 1073741824.0, (free0 - free1) / 1024.0 / (usable / 1073741824.0));
  printf("reserved %.0f GiB at 0x%llx: %llu places of %zu B backed by %llu chunks (%.1f GiB), %.0f GiB accessible\n",
         RESERVE / 1073741824.0, (unsigned long long)base, places, gran, POOL, POOL * gran / 1073741824.0,
         usable / 1073741824.0);
  struct W { unsigned long long stride, g; std::vector<unsigned long long> groups; };
  const std::vector<W> walks = {
      // Address order: where does level 2 overflow, and level 3?
      {32ull << 20, 1, {1024, 2048, 2176, 2304, 2432, 2560, 3072, 4096, 6144, 8192, 16384, 29000}},
      {64ull << 20, 1, {1024, 2048, 2112, 2176, 2240, 2304, 2432, 2560, 3072, 4096, 4608, 5120, 6144, 8192, 10240, 12288, 15000}},
      {128ull << 20, 1, {2048, 2304, 4096, 4608, 6144, 7400}},
      {1ull << 30, 1, {511, 900}},
      // The same lines in two orders: 4 MiB apart, groups of 8 (32 MiB ranges) and none.
      {4ull << 20, 8, {1024, 2048, 2304, 2560, 4096}},
      {4ull << 20, 1, {8192, 16384, 18432, 20480, 32768}},
      // 8 MiB apart, groups of 8 (64 MiB ranges): level 3's overflow.
      {8ull << 20, 8, {4096, 8192, 12000}},
  };
  for (const W& w : walks) {
    const unsigned long long step = step_bytes(w.stride);
    for (unsigned long long groups : w.groups) {
      const unsigned long long nodes = groups * w.g;
      if (nodes * step + 8 > usable) continue;
      // No two nodes on one physical line: (chunk, offset / 128) distinct.
      std::set<std::pair<unsigned long long, unsigned long long>> lines;
      bool alias = false;
      for (unsigned long long k = 0; k < nodes && !alias; ++k) {
        const unsigned long long at = k * step;
        alias = !lines.insert({(at / gran) % POOL, (at % gran) / 128}).second;
      }
      if (alias) {
        printf("stride %llu MiB nodes %llu: two nodes share a physical line, skipped\n", w.stride >> 20, nodes);
        continue;
      }
      init_chain<<<(unsigned)std::min<unsigned long long>(4096, (nodes + 255) / 256), 256>>>(
          (unsigned char*)base, nodes, w.g, step);
      walk<<<1, 32>>>((const unsigned char*)base, step, 2 * nodes, d_lat, d_end);
      RK(cudaDeviceSynchronize());
      std::vector<unsigned> lat(STEPS);
      RK(cudaMemcpy(lat.data(), d_lat, STEPS * 4, cudaMemcpyDeviceToHost));
      double mean = 0;
      for (unsigned v : lat) mean += v;
      mean /= STEPS;
      std::sort(lat.begin(), lat.end());
      auto q = [&](unsigned pct) { return lat[std::min<unsigned>(STEPS - 1, STEPS * pct / 100)]; };
      printf("alias stride %llu MiB group %llu groups %llu nodes %llu span %.1f GiB: p5 %u p25 %u p50 %u p75 %u p95 %u mean %.1f\n",
             w.stride >> 20, w.g, groups, nodes, nodes * (double)step / 1073741824.0, q(5), q(25), q(50), q(75), q(95),
             mean);
      fflush(stdout);
    }
  }
  for (unsigned long long j = 0; j < places; ++j) CK(cuMemUnmap(base + j * gran, gran));
  CK(cuMemAddressFree(base, RESERVE));
  for (auto h : pool) CK(cuMemRelease(h));
  return 0;
}
