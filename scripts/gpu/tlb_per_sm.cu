// Probes: does the cost of a second-level TLB miss depend on the SM that misses? memtopo's
// one-block chases run on one SM (SM 124 on the H100s and H200s seen so far), whose place
// in its GPC differs between GPUs of one model by floor-sweeping; the miss cost it reports
// is +93 to +111 cycles on most GPUs and +143 to +170 on a few. Here every SM in turn walks
// the same two chains through a reservation of aliased virtual addresses (a pool of 64 MiB
// physical chunks mapped over and over, as tlb_alias.cu does; ld.global.cg, one thread,
// nodes 32 MiB plus a few lines apart): 1024 nodes (the second level holds them; the first
// level of 16 entries does not) and 4096 nodes (the second level, ~2300 entries of 32 MiB,
// does not; the third, 4096+ entries of 64 MiB, does). The difference of the medians is the
// second level's miss cost seen from that SM. Only the block on the chosen SM walks; one
// block fits an SM at a time (the opt-in shared memory).
// Prints `sm,p50_1024,p50_4096,miss_cost` per SM.
// Backs: the TLB miss cost by the SM's L2 partition side in docs/results/h100-deep.md and
// h200-deep.md (docs/evidence/2026-11-28-h100-h200-gpc-contention/).
//   nvcc -O2 -arch=sm_90 -o tlb_sm scripts/gpu/tlb_per_sm.cu -lcuda && ./tlb_sm > tlb.csv
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
static const unsigned long long CHUNK = 64ull << 20;
static const unsigned long long POOL = 64;                 // 4 GiB of physical chunks
static const unsigned long long RESERVE = 192ull << 30;    // 3072 places

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
__device__ __forceinline__ unsigned smid() { unsigned s; asm volatile("mov.u32 %0, %%smid;" : "=r"(s)); return s; }

__global__ void init_chain(unsigned char* base, unsigned long long nodes, unsigned long long step) {
  for (unsigned long long p = blockIdx.x * blockDim.x + threadIdx.x; p < nodes; p += gridDim.x * blockDim.x)
    *reinterpret_cast<unsigned long long*>(base + p * step) = p + 1 == nodes ? 0 : p + 1;
}

// Only the first block that lands on SM `target` walks.
__global__ void walk(const unsigned char* base, unsigned long long step, unsigned long long warm, unsigned target,
                     int* claimed, unsigned* out_lat, unsigned long long* out_end) {
  __shared__ volatile unsigned long long sink;
  if (threadIdx.x != 0 || smid() != target || atomicCAS(claimed, 0, 1) != 0) return;
  unsigned long long j = 0;
  for (unsigned long long k = 0; k < warm; ++k) j = ld_cg(base + j * step);
  for (unsigned k = 0; k < STEPS; ++k) {
    const unsigned char* p = base + j * step;
    unsigned t0 = clock_now();
    j = ld_cg(p);
    sink = j;
    unsigned t1 = clock_now();
    out_lat[k] = t1 - t0;
  }
  *out_end = j + sink;
}

int main() {
  RK(cudaSetDevice(0));
  RK(cudaFree(0));
  CUdevice dev;
  CK(cuCtxGetDevice(&dev));
  int sms = 0, smem = 0;
  RK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  RK(cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
  smem -= 1024;
  RK(cudaFuncSetAttribute(walk, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  std::vector<CUmemGenericAllocationHandle> pool(POOL);
  for (auto& h : pool) CK(cuMemCreate(&h, CHUNK, &prop, 0));
  CUdeviceptr base = 0;
  CK(cuMemAddressReserve(&base, RESERVE, 1ull << 30, 0, 0));
  const unsigned long long places = RESERVE / CHUNK;
  for (unsigned long long j = 0; j < places; ++j) CK(cuMemMap(base + j * CHUNK, CHUNK, 0, pool[j % POOL], 0));
  CUmemAccessDesc access = {};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  for (unsigned long long at = 0; at < RESERVE; at += 16ull << 30) CK(cuMemSetAccess(base + at, 16ull << 30, &access, 1));
  // 32 MiB plus 7 lines: nodes of one walk fall on distinct lines of the pool (4096 nodes x
  // 7 lines wrap no 64 MiB chunk offset onto another node's within the reservation).
  const unsigned long long step = (32ull << 20) + 7 * 128;
  unsigned* d_lat;
  unsigned long long* d_end;
  int* claimed;
  RK(cudaMalloc(&d_lat, STEPS * 4));
  RK(cudaMalloc(&d_end, 8));
  RK(cudaMalloc(&claimed, 4));
  const unsigned long long counts[2] = {1024, 4096};
  std::vector<std::vector<unsigned>> p50(2, std::vector<unsigned>(sms));
  std::vector<unsigned> lat(STEPS);
  for (int c = 0; c < 2; ++c) {
    const unsigned long long nodes = counts[c];
    if (nodes * step + 8 > RESERVE) { fprintf(stderr, "reservation too small\n"); return 1; }
    init_chain<<<(unsigned)((nodes + 255) / 256), 256>>>((unsigned char*)base, nodes, step);
    RK(cudaDeviceSynchronize());
    for (int s = 0; s < sms; ++s) {
      RK(cudaMemset(claimed, 0, 4));
      walk<<<2 * sms, 32, smem>>>((const unsigned char*)base, step, 2 * nodes, s, claimed, d_lat, d_end);
      RK(cudaDeviceSynchronize());
      RK(cudaMemcpy(lat.data(), d_lat, STEPS * 4, cudaMemcpyDeviceToHost));
      std::nth_element(lat.begin(), lat.begin() + STEPS / 2, lat.end());
      p50[c][s] = lat[STEPS / 2];
    }
  }
  printf("sm,p50_1024,p50_4096,miss_cost\n");
  for (int s = 0; s < sms; ++s)
    printf("%d,%u,%u,%d\n", s, p50[0][s], p50[1][s], (int)p50[1][s] - (int)p50[0][s]);
  for (unsigned long long j = 0; j < places; ++j) CK(cuMemUnmap(base + j * CHUNK, CHUNK));
  CK(cuMemAddressFree(base, RESERVE));
  for (auto h : pool) CK(cuMemRelease(h));
  return 0;
}
