// The NTT kernels compiled for the host: kernels/field.cu and kernels/ntt.cu as they
// are, each launch run block by block with a block's threads as host threads, so the
// kernels' own index arithmetic, shared-memory layout, barriers and warp shuffles are
// what the test in src/ntt.rs (module `host`) checks against the CPU NTT.
//
// Protocol (stdin → stdout), one command per line:
//   buf <id> <hex>                               sets buffer <id> (bytes, memory order)
//   launch <kernel> <grid> <block> <smem> <arg>...   runs a kernel; each <arg> is
//        b<id> (a buffer, as a pointer), u<decimal> (a u32) or f<hex> (an Fr by value)
//   get <id>                                     prints buffer <id> as hex
// Every command prints one line ("ok" or the hex); errors exit with status 2.

#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <algorithm>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#define __device__
#define __forceinline__ inline
#define __noinline__
#define __constant__ static const
#define __global__
#define __launch_bounds__(...)
// Statically sized shared memory: one array per kernel, shared by the block's threads
// (blocks run one at a time).
#define __shared__ static
struct Dim3 {
    unsigned x, y, z;
};
static thread_local Dim3 threadIdx{0, 0, 0}, blockIdx{0, 0, 0};
static Dim3 blockDim{1, 1, 1}, gridDim{1, 1, 1};

// A reusable barrier for `n` threads.
struct Barrier {
    std::mutex m;
    std::condition_variable cv;
    unsigned n = 0, count = 0, gen = 0;
    void wait() {
        std::unique_lock<std::mutex> l(m);
        unsigned g = gen;
        if (++count == n) {
            count = 0;
            gen++;
            cv.notify_all();
        } else {
            cv.wait(l, [&] { return gen != g; });
        }
    }
};
static Barrier g_block;
static std::vector<std::unique_ptr<Barrier>> g_warps;
static std::vector<unsigned> g_lanes;  // a slot per thread for the shuffles
static std::vector<unsigned> g_dynamic;  // the launch's dynamic shared memory

static inline void __syncthreads() { g_block.wait(); }
// Every lane of the warp calls it with the same mask (as the kernels do): each
// publishes its value, all wait, each reads its partner's, all wait again.
static inline unsigned __shfl_xor_sync(unsigned, unsigned v, unsigned lane_mask) {
    const unsigned t = threadIdx.x, w = t / 32;
    g_lanes[t] = v;
    g_warps[w]->wait();
    unsigned r = g_lanes[(t & ~31u) | ((t & 31u) ^ lane_mask)];
    g_warps[w]->wait();
    return r;
}
struct uint4 {
    unsigned x, y, z, w;
};
static inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return uint4{a, b, c, d}; }
static inline unsigned __brev(unsigned x) {
    unsigned r = 0;
    for (int i = 0; i < 32; i++) r |= ((x >> i) & 1u) << (31 - i);
    return r;
}
#define CUZK_DYNAMIC_SMEM(name) unsigned* name = g_dynamic.data()

#include "field.cu"
#include "ntt.cu"

static std::vector<unsigned char> unhex(const std::string& h) {
    std::vector<unsigned char> out(h.size() / 2);
    for (size_t i = 0; i < out.size(); i++) out[i] = (unsigned char)std::stoi(h.substr(2 * i, 2), nullptr, 16);
    return out;
}

[[noreturn]] static void fail(const std::string& why) {
    std::fprintf(stderr, "ntt_host: %s\n", why.c_str());
    std::exit(2);
}

static std::map<int, std::vector<Fr>> g_bufs;

// A launch's arguments after the kernel's name and shape.
struct Args {
    std::vector<std::string> a;
    const std::string& at(size_t i) const {
        if (i >= a.size()) fail("too few arguments");
        return a[i];
    }
    Fr* b(size_t i) const {
        const std::string& s = at(i);
        if (s[0] != 'b') fail("argument " + std::to_string(i) + " is not a buffer: " + s);
        auto it = g_bufs.find(std::stoi(s.substr(1)));
        if (it == g_bufs.end()) fail("no buffer " + s);
        return it->second.data();
    }
    u32 u(size_t i) const {
        const std::string& s = at(i);
        if (s[0] != 'u') fail("argument " + std::to_string(i) + " is not a u32: " + s);
        return (u32)std::stoul(s.substr(1));
    }
    Fr f(size_t i) const {
        const std::string& s = at(i);
        if (s[0] != 'f') fail("argument " + std::to_string(i) + " is not an Fr: " + s);
        std::vector<unsigned char> b = unhex(s.substr(1));
        if (b.size() != sizeof(Fr)) fail("an Fr of " + std::to_string(b.size()) + " bytes");
        Fr x;
        std::memcpy(&x, b.data(), sizeof(Fr));
        return x;
    }
};

typedef std::function<void(const Args&)> Kernel;
static const std::map<std::string, Kernel>& kernels() {
    static const std::map<std::string, Kernel> k = {
        {"ntt_pass", [](const Args& a) { ntt_pass(a.b(0), a.u(1), a.u(2), a.u(3), a.u(4), a.u(5), a.b(6), a.b(7)); }},
        {"ntt_r2wf_dif", [](const Args& a) { ntt_r2wf_dif(a.b(0), a.u(1), a.u(2), a.u(3), a.u(4), a.b(5), a.b(6), a.b(7)); }},
        {"ntt_r2wf_dit", [](const Args& a) { ntt_r2wf_dit(a.b(0), a.u(1), a.u(2), a.u(3), a.u(4), a.b(5), a.b(6), a.b(7)); }},
        {"ntt_r2wg_dif", [](const Args& a) { ntt_r2wg_dif(a.b(0), a.u(1), a.u(2), a.u(3), a.u(4), a.u(5), a.b(6)); }},
        {"ntt_r2wg_dit", [](const Args& a) { ntt_r2wg_dit(a.b(0), a.u(1), a.u(2), a.u(3), a.u(4), a.u(5), a.b(6)); }},
        {"ntt_pass_g", [](const Args& a) { ntt_pass_g(a.b(0), a.u(1), a.u(2), a.u(3), a.u(4), a.u(5), a.u(6), a.b(7)); }},
        {"ntt_r2wg_table", [](const Args& a) { ntt_r2wg_table(a.b(0), a.u(1), a.b(2), a.b(3)); }},
        {"scale_by_powers", [](const Args& a) { scale_by_powers(a.b(0), a.u(1), a.u(2), a.b(3), a.b(4)); }},
        {"bitrev_permute", [](const Args& a) { bitrev_permute(a.b(0), a.u(1), a.u(2), a.f(3)); }},
        {"bitrev_tiled", [](const Args& a) { bitrev_tiled(a.b(0), a.u(1), a.u(2), a.f(3)); }},
        {"bitrev_scale_sub_copy",
         [](const Args& a) { bitrev_scale_sub_copy(a.b(0), a.b(1), a.b(2), a.u(3), a.b(4), a.b(5), a.f(6)); }},
        {"bitrev_scale_sub",
         [](const Args& a) { bitrev_scale_sub(a.b(0), a.b(1), a.u(2), a.b(3), a.b(4), a.f(5)); }},
        {"ab_combine", [](const Args& a) { ab_combine(a.b(0), a.b(1), a.u(2), a.f(3)); }},
    };
    return k;
}

// Runs the grid block by block; a block's threads run as host threads that meet at
// __syncthreads and at the warp shuffles.
static void launch(const Kernel& k, unsigned grid, unsigned block, unsigned smem, const Args& args) {
    if (block == 0 || block > 1024) fail("a block of " + std::to_string(block) + " threads");
    gridDim = Dim3{grid, 1, 1};
    blockDim = Dim3{block, 1, 1};
    g_dynamic.assign((smem + 3) / 4, 0xffffffffu);  // poisoned, as on the device
    g_lanes.assign(block, 0);
    for (unsigned b = 0; b < grid; b++) {
        g_block.n = block;
        g_block.count = 0;
        g_warps.clear();
        for (unsigned w = 0; w < (block + 31) / 32; w++) {
            g_warps.push_back(std::make_unique<Barrier>());
            g_warps.back()->n = std::min(32u, block - 32 * w);
        }
        std::vector<std::thread> threads;
        threads.reserve(block);
        for (unsigned t = 0; t < block; t++) {
            threads.emplace_back([&, t, b] {
                threadIdx = Dim3{t, 0, 0};
                blockIdx = Dim3{b, 0, 0};
                k(args);
            });
        }
        for (auto& th : threads) th.join();
    }
}

int main() {
    std::ios::sync_with_stdio(false);
    std::string line;
    while (std::getline(std::cin, line)) {
        std::istringstream in(line);
        std::string cmd;
        in >> cmd;
        if (cmd == "buf") {
            int id;
            std::string hex;
            in >> id >> hex;
            std::vector<unsigned char> b = unhex(hex);
            std::vector<Fr> v(b.size() / sizeof(Fr));
            std::memcpy(v.data(), b.data(), v.size() * sizeof(Fr));
            g_bufs[id] = v;
            std::printf("ok\n");
        } else if (cmd == "get") {
            int id;
            in >> id;
            auto it = g_bufs.find(id);
            if (it == g_bufs.end()) fail("no buffer " + std::to_string(id));
            const unsigned char* p = reinterpret_cast<const unsigned char*>(it->second.data());
            for (size_t i = 0; i < it->second.size() * sizeof(Fr); i++) std::printf("%02x", p[i]);
            std::printf("\n");
        } else if (cmd == "launch") {
            std::string name;
            unsigned grid, block, smem;
            in >> name >> grid >> block >> smem;
            Args a;
            std::string s;
            while (in >> s) a.a.push_back(s);
            auto it = kernels().find(name);
            if (it == kernels().end()) fail("no kernel " + name);
            launch(it->second, grid, block, smem, a);
            std::printf("ok\n");
        } else if (!cmd.empty()) {
            fail("unknown command " + cmd);
        }
        std::fflush(stdout);
    }
    return 0;
}
