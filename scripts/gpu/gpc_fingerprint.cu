// Probes: which GPC an SM is in, by a second method beside cluster placement. Every SM times
// L2 hits to the same K lines, one load at a time; the latency of a hit depends on the
// distance from the SM's GPC to the L2 slice that holds the line, so SMs of one GPC share a
// latency fingerprint over the K lines. Prints, per SM, the median over the timed passes of
// each line's cycles (a CSV: sm, then K values) for two independent line sets;
// gpc_fingerprint_analysis.py compares it with a memtopo result's GPC map.
// Backs: docs/results/h100.md, GPCs (the eight SMs placement leaves unassigned lie nearest
// to GPCs 0 and 6; docs/evidence/2026-11-25-h100-gpc-fingerprint/).
//   nvcc -O2 -arch=sm_90 -o gpc_fp scripts/gpu/gpc_fingerprint.cu && ./gpc_fp > fp.csv
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__); return 1; } } while (0)

constexpr int K = 512;      // lines per fingerprint
constexpr int PASSES = 9;   // timed passes (median taken on the host)
constexpr int WARM = 2;     // untimed passes first

__device__ __forceinline__ uint32_t ld_cg(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ uint32_t smid() { uint32_t s; asm volatile("mov.u32 %0, %%smid;" : "=r"(s)); return s; }

// The first block on each SM chases the K-node chain (WARM untimed passes, then PASSES timed
// passes); out[(sm * PASSES + pass) * K + i] = cycles of the i-th load of that pass.
__global__ void fingerprint(const uint32_t* chain, uint32_t start, int* claimed, uint32_t* out) {
  __shared__ volatile uint32_t sink;
  if (threadIdx.x != 0) return;
  uint32_t s = smid();
  if (atomicCAS(&claimed[s], 0, 1) != 0) return;
  uint32_t j = start;
  for (int p = 0; p < WARM; ++p)
    for (int i = 0; i < K; ++i) j = ld_cg(chain + j);
  for (int p = 0; p < PASSES; ++p) {
    for (int i = 0; i < K; ++i) {
      uint32_t t0, t1;
      asm volatile("mov.u32 %0, %%clock;" : "=r"(t0) :: "memory");
      j = ld_cg(chain + j);
      sink = j;  // the load completes before the second clock read
      asm volatile("mov.u32 %0, %%clock;" : "=r"(t1) :: "memory");
      out[((size_t)s * PASSES + p) * K + i] = t1 - t0 + (j == 0xffffffffu);
    }
  }
}

int main() {
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  int smem = 0;
  CHECK(cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
  smem -= 1024;  // room for the static `sink`
  const size_t region = 32u << 20;  // lines drawn from 32 MiB
  const size_t words = region / 4;
  uint32_t* chain;
  CHECK(cudaMalloc(&chain, region));
  int* claimed;
  CHECK(cudaMalloc(&claimed, sms * sizeof(int)));
  uint32_t* out;
  size_t out_n = (size_t)sms * PASSES * K;
  CHECK(cudaMalloc(&out, out_n * 4));
  std::vector<uint32_t> host(words, 0), res(out_n);
  CHECK(cudaFuncSetAttribute(fingerprint, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  for (int set = 0; set < 2; ++set) {
    // K distinct random lines (128 B) of the region, chased in a random cyclic order.
    std::mt19937_64 rng(1234 + set);
    std::vector<uint32_t> lines(region / 128);
    for (size_t i = 0; i < lines.size(); ++i) lines[i] = (uint32_t)i;
    std::shuffle(lines.begin(), lines.end(), rng);
    lines.resize(K);
    std::fill(host.begin(), host.end(), 0);
    for (int i = 0; i < K; ++i) host[lines[i] * 32] = lines[(i + 1) % K] * 32;
    CHECK(cudaMemcpy(chain, host.data(), region, cudaMemcpyHostToDevice));
    for (int rep = 0; rep < 2; ++rep) {
      CHECK(cudaMemset(claimed, 0, sms * sizeof(int)));
      CHECK(cudaMemset(out, 0, out_n * 4));
      // 2 blocks per SM launched, one resident per SM (the opt-in shared memory): the first
      // block on each SM measures, the others leave.
      fingerprint<<<2 * sms, 32, smem>>>(chain, lines[0] * 32, claimed, out);
      CHECK(cudaGetLastError());
      CHECK(cudaDeviceSynchronize());
      CHECK(cudaMemcpy(res.data(), out, out_n * 4, cudaMemcpyDeviceToHost));
      for (int s = 0; s < sms; ++s) {
        printf("set%d,rep%d,%d", set, rep, s);
        for (int i = 0; i < K; ++i) {
          uint32_t v[PASSES];
          for (int p = 0; p < PASSES; ++p) v[p] = res[((size_t)s * PASSES + p) * K + i];
          std::nth_element(v, v + PASSES / 2, v + PASSES);
          printf(",%u", v[PASSES / 2]);
        }
        printf("\n");
      }
    }
  }
  return 0;
}
