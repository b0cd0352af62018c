// Oracle: peer copies between every pair of a node's GPUs by plain cudaMemcpyPeerAsync, as
// NVIDIA's nvbandwidth's copy-engine tests time them (events around repeated copies on a
// stream of the destination GPU, peer access enabled both ways): one direction (the
// destination pulls), both directions at once (one stream per direction), and every
// ordered pair at once. The second method beside memtopo's link figures.
// Prints, per ordered pair, GB/s (1e9 bytes per second) of the median of five timed copies
// after one untimed, then the at-once figures.
// Backs: the peer copy against an oracle in docs/evidence/2026-11-28-h200x4-node-links-at-once/.
//   nvcc -O2 -o peer_copy scripts/gpu/peer_copy.cu && ./peer_copy [MiB]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__); exit(1); } } while (0)

constexpr int REPEATS = 5;

struct Gpu {
  void* buf;
  cudaStream_t stream;
};

// Median GB/s of REPEATS copies of `bytes` from `src` into `dst` on `dst`'s stream.
static double one_way(std::vector<Gpu>& g, int dst, int src, size_t bytes) {
  CHECK(cudaSetDevice(dst));
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  CHECK(cudaMemcpyPeerAsync(g[dst].buf, dst, g[src].buf, src, bytes, g[dst].stream));
  std::vector<double> rates;
  for (int r = 0; r < REPEATS; ++r) {
    CHECK(cudaEventRecord(a, g[dst].stream));
    CHECK(cudaMemcpyPeerAsync(g[dst].buf, dst, g[src].buf, src, bytes, g[dst].stream));
    CHECK(cudaEventRecord(b, g[dst].stream));
    CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    rates.push_back(bytes / (ms * 1e-3) / 1e9);
  }
  std::sort(rates.begin(), rates.end());
  return rates[REPEATS / 2];
}

// Every copy of `pairs` at once (each on a stream of its own on its destination), after an
// untimed round, REPEATS times; the median over repeats of each copy's rate, timed by its
// own events.
static std::vector<double> at_once(std::vector<Gpu>& g, const std::vector<std::pair<int, int>>& pairs,
                                   size_t bytes, std::vector<std::vector<void*>>& dst_bufs) {
  std::vector<cudaStream_t> streams(pairs.size());
  for (size_t i = 0; i < pairs.size(); ++i) {
    CHECK(cudaSetDevice(pairs[i].first));
    CHECK(cudaStreamCreateWithFlags(&streams[i], cudaStreamNonBlocking));
  }
  std::vector<std::vector<double>> rates(pairs.size());
  for (int r = 0; r <= REPEATS; ++r) {
    for (int d = 0; d < (int)g.size(); ++d) {
      CHECK(cudaSetDevice(d));
      CHECK(cudaDeviceSynchronize());
    }
    std::vector<cudaEvent_t> start(pairs.size()), stop(pairs.size());
    for (size_t i = 0; i < pairs.size(); ++i) {
      CHECK(cudaSetDevice(pairs[i].first));
      CHECK(cudaEventCreate(&start[i]));
      CHECK(cudaEventCreate(&stop[i]));
    }
    for (size_t i = 0; i < pairs.size(); ++i) {
      CHECK(cudaSetDevice(pairs[i].first));
      CHECK(cudaEventRecord(start[i], streams[i]));
      CHECK(cudaMemcpyPeerAsync(dst_bufs[pairs[i].first][i], pairs[i].first, g[pairs[i].second].buf,
                                pairs[i].second, bytes, streams[i]));
      CHECK(cudaEventRecord(stop[i], streams[i]));
    }
    for (size_t i = 0; i < pairs.size(); ++i) {
      CHECK(cudaSetDevice(pairs[i].first));
      CHECK(cudaEventSynchronize(stop[i]));
      float ms = 0;
      CHECK(cudaEventElapsedTime(&ms, start[i], stop[i]));
      if (r > 0) rates[i].push_back(bytes / (ms * 1e-3) / 1e9);
    }
  }
  std::vector<double> out;
  for (auto& v : rates) {
    std::sort(v.begin(), v.end());
    out.push_back(v[v.size() / 2]);
  }
  return out;
}

int main(int argc, char** argv) {
  const size_t bytes = (argc > 1 ? atoll(argv[1]) : 256) << 20;
  int n = 0;
  CHECK(cudaGetDeviceCount(&n));
  if (n < 2) { printf("one GPU: nothing to copy between\n"); return 0; }
  std::vector<Gpu> g(n);
  for (int d = 0; d < n; ++d) {
    CHECK(cudaSetDevice(d));
    CHECK(cudaMalloc(&g[d].buf, bytes));
    CHECK(cudaMemset(g[d].buf, d, bytes));
    CHECK(cudaStreamCreateWithFlags(&g[d].stream, cudaStreamNonBlocking));
    for (int o = 0; o < n; ++o) {
      if (o == d) continue;
      int can = 0;
      CHECK(cudaDeviceCanAccessPeer(&can, d, o));
      if (can) {
        cudaError_t e = cudaDeviceEnablePeerAccess(o, 0);
        if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) CHECK(e);
        cudaGetLastError();
      }
    }
  }
  printf("%d GPUs, %zu MiB per copy, median of %d\n", n, bytes >> 20, REPEATS);
  for (int dst = 0; dst < n; ++dst)
    for (int src = 0; src < n; ++src)
      if (src != dst) printf("pull %d <- %d: %.1f GB/s\n", dst, src, one_way(g, dst, src, bytes));
  // Extra destination buffers so that copies at once never share one.
  std::vector<std::pair<int, int>> all;
  for (int dst = 0; dst < n; ++dst)
    for (int src = 0; src < n; ++src)
      if (src != dst) all.push_back({dst, src});
  std::vector<std::vector<void*>> dst_bufs(n, std::vector<void*>(all.size(), nullptr));
  for (size_t i = 0; i < all.size(); ++i) {
    CHECK(cudaSetDevice(all[i].first));
    CHECK(cudaMalloc(&dst_bufs[all[i].first][i], bytes));
  }
  for (int a = 0; a < n; ++a)
    for (int b = a + 1; b < n; ++b) {
      std::vector<std::pair<int, int>> both = {{a, b}, {b, a}};
      std::vector<std::vector<void*>> bufs(n, std::vector<void*>(2, nullptr));
      bufs[a][0] = dst_bufs[a][std::find(all.begin(), all.end(), std::make_pair(a, b)) - all.begin()];
      bufs[b][1] = dst_bufs[b][std::find(all.begin(), all.end(), std::make_pair(b, a)) - all.begin()];
      auto r = at_once(g, both, bytes, bufs);
      printf("both ways %d <-> %d: %.1f + %.1f = %.1f GB/s\n", a, b, r[0], r[1], r[0] + r[1]);
    }
  auto r = at_once(g, all, bytes, dst_bufs);
  double sum = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    printf("all at once %d <- %d: %.1f GB/s\n", all[i].first, all[i].second, r[i]);
    sum += r[i];
  }
  printf("all at once: %zu copies, %.1f GB/s in all, %.1f GB/s per copy on average\n", all.size(), sum,
         sum / all.size());
  return 0;
}
