// L2 sector experiment (docs/results/h200.md, "L2 sector"): does a load hit the L2 after
// only part of its line was written? After an L2 flush, one thread writes the first w bytes
// of fresh lines with st.global.cg, fences, then times one ld.global.cg per line at byte
// offset r. A load hits (L2 latency) when the bytes it needs are valid in the L2 without a
// fetch from memory; with per-sector valid bits and no fetch on a write miss, that is when
// the write covered the whole sector holding offset r. Build and run on the GPU machine:
//   nvcc -O2 -arch=sm_90 -o l2_sector_write scripts/gpu/l2_sector_write.cu && ./l2_sector_write
#include <cstdio>
#include <cstdint>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__); return 1; } } while (0)

// Written bytes per line (index 0..7) and read offsets (index 0..3).
__host__ __device__ constexpr int width(int i) {
  return i == 0 ? 0 : i == 1 ? 4 : i == 2 ? 8 : i == 3 ? 16 : i == 4 ? 32 : i == 5 ? 64 : i == 6 ? 96 : 128;
}
__host__ __device__ constexpr int offset(int r) { return 32 * r; }
constexpr int kW = 8;
constexpr int kR = 4;
constexpr int kReps = 32;                 // fresh lines per (width, offset)
constexpr size_t kLineSpacing = 4096;     // lines far apart: no neighbour effects
constexpr int kLines = kW * kR * kReps;

__global__ void probe(uint8_t* base, uint32_t* out) {
  __shared__ volatile uint32_t sink;
  // Phase 1: partial writes. Line k gets width width((k / kReps) / kR).
  for (int k = 0; k < kLines; ++k) {
    int w = width((k / kReps) / kR);
    uint8_t* line = base + (size_t)k * kLineSpacing;
    for (int b = 0; b < w; b += 4) {
      asm volatile("st.global.cg.u32 [%0], %1;" :: "l"(line + b), "r"(0x1234u) : "memory");
    }
  }
  __threadfence();
  // Phase 2: one timed load per line at offset offset((k / kReps) % kR).
  for (int k = 0; k < kLines; ++k) {
    int r = offset((k / kReps) % kR);
    uint8_t* p = base + (size_t)k * kLineSpacing + r;
    uint32_t v, t0, t1;
    asm volatile("mov.u32 %0, %%clock;" : "=r"(t0) :: "memory");
    asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    sink = v;  // the clock below waits for the load through this store
    asm volatile("mov.u32 %0, %%clock;" : "=r"(t1) :: "memory");
    out[k] = t1 - t0;
  }
}

int main() {
  int l2 = 0;
  CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
  uint8_t* lines;
  uint8_t* flush;
  uint32_t* out;
  size_t bytes = (size_t)kLines * kLineSpacing;
  size_t flush_bytes = 4 * (size_t)l2;
  CHECK(cudaMalloc(&lines, bytes));
  CHECK(cudaMalloc(&flush, flush_bytes));
  CHECK(cudaMalloc(&out, kLines * sizeof(uint32_t)));
  CHECK(cudaMemset(lines, 0, bytes));
  uint32_t host[kLines];
  for (int trial = 0; trial < 3; ++trial) {
    // Evict `lines` from the L2: write a buffer four times the L2 twice.
    CHECK(cudaMemset(flush, trial, flush_bytes));
    CHECK(cudaMemset(flush, trial + 1, flush_bytes));
    CHECK(cudaDeviceSynchronize());
    probe<<<1, 1>>>(lines, out);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(host, out, sizeof(host), cudaMemcpyDeviceToHost));
    printf("trial %d (L2 %d B): median cycles of %d loads per (written bytes w, read offset r)\n",
           trial, l2, kReps);
    printf("%8s", "w \\ r");
    for (int r = 0; r < kR; ++r) printf(" %8d", offset(r));
    printf("\n");
    for (int w = 0; w < kW; ++w) {
      printf("%8d", width(w));
      for (int r = 0; r < kR; ++r) {
        uint32_t v[kReps];
        for (int i = 0; i < kReps; ++i) v[i] = host[(w * kR + r) * kReps + i];
        for (int i = 1; i < kReps; ++i)
          for (int j = i; j > 0 && v[j - 1] > v[j]; --j) { uint32_t t = v[j]; v[j] = v[j - 1]; v[j - 1] = t; }
        printf(" %8u", v[kReps / 2]);
      }
      printf("\n");
    }
  }
  return 0;
}
