// block_cache.h: per-thread recycling of heap blocks of one size, for the
// objects an op's path makes and drops once per op (the core's Work, the
// request handle plugin_table.h hands out).
//
// An op is posted, waited for and dropped before the next one, so a block
// freed by one op is usually the next op's: kept in a small per-thread
// cache, it skips malloc and free (issue 16: the 8-byte allreduce's path).
// Past kKeep blocks a thread keeps, blocks go back to the heap, and a
// thread's blocks go when it ends.
//
// Thread safety: Allocate and Free may be called from any thread. A block
// freed on another thread than the one that allocated it joins the freeing
// thread's cache. The cache is trivially destructible, so it stays usable
// while its thread ends (an object dropped by another thread_local's
// destructor); its owner, registered with the first block kept, frees the
// blocks and closes the cache, after which blocks go straight to the heap.
//
// Example:
//   using Cache = BlockCache<sizeof(Handle)>;
//   Handle* h = new (Cache::Allocate()) Handle{std::move(request)};
//   ...
//   h->~Handle();
//   Cache::Free(h);
#ifndef SYNCLINE_PLUGIN_SDK_BLOCK_CACHE_H_
#define SYNCLINE_PLUGIN_SDK_BLOCK_CACHE_H_

#include <cstddef>
#include <new>

namespace syncline::backend {

// BlockCache
//
// Blocks of kSize bytes from the global operator new, aligned as it aligns.
template <size_t kSize>
class BlockCache {
 public:
  // A block of kSize bytes; throws std::bad_alloc as operator new does.
  static void* Allocate() {
    Blocks& cache = blocks_;
    if (cache.n > 0) return cache.blocks[--cache.n];
    return ::operator new(kSize);
  }

  // Takes back a block from Allocate() (of any thread).
  static void Free(void* block) noexcept {
    Blocks& cache = blocks_;
    if (cache.closed || cache.n == kKeep) {
      ::operator delete(block, kSize);
      return;
    }
    if (!cache.owned) {
      cache.owned = true;
      static_cast<void>(&owner_);  // registers the owner's destructor
    }
    cache.blocks[cache.n++] = block;
  }

 private:
  static constexpr int kKeep = 8;
  struct Blocks {
    void* blocks[kKeep];
    int n;
    bool owned;   // owner_ is registered for this thread
    bool closed;  // the thread is ending
  };
  struct Owner {
    ~Owner() {
      Blocks& cache = blocks_;
      cache.closed = true;
      while (cache.n > 0) ::operator delete(cache.blocks[--cache.n], kSize);
    }
  };
  static inline thread_local Blocks blocks_{};
  static inline thread_local Owner owner_;
};

// BlockAllocator
//
// An allocator whose single objects come from BlockCache, for
// std::allocate_shared: the object and its reference counts share one
// recycled block (the mpi backend's Request, one per op). Arrays (n > 1)
// come from the heap.
//
// Example:
//   auto request = std::allocate_shared<Request>(BlockAllocator<Request>(), op);
template <typename T>
class BlockAllocator {
 public:
  using value_type = T;

  BlockAllocator() = default;
  template <typename U>
  BlockAllocator(const BlockAllocator<U>&) noexcept {}  // NOLINT: rebinding converts

  T* allocate(size_t n) {
    static_assert(alignof(T) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__,
                  "BlockCache's blocks are aligned as operator new aligns");
    if (n != 1) return static_cast<T*>(::operator new(n * sizeof(T)));
    return static_cast<T*>(BlockCache<sizeof(T)>::Allocate());
  }

  void deallocate(T* p, size_t n) noexcept {
    if (n != 1) {
      ::operator delete(p, n * sizeof(T));
      return;
    }
    BlockCache<sizeof(T)>::Free(p);
  }

  template <typename U>
  bool operator==(const BlockAllocator<U>&) const noexcept { return true; }
  template <typename U>
  bool operator!=(const BlockAllocator<U>&) const noexcept { return false; }
};

}  // namespace syncline::backend

#endif  // SYNCLINE_PLUGIN_SDK_BLOCK_CACHE_H_
