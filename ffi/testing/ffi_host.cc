// The host XLA FFI API (ffi_host.h).
#include "testing/ffi_host.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdlib>

// The opaque C API types, as the host defines them.
struct XLA_FFI_Error {
  XLA_FFI_Error_Code code;
  std::string message;
};

struct XLA_FFI_ExecutionContext {
  jgo::testing::HostFfi* host;
  std::atomic<int64_t> live_scratch{0};  // allocations not yet freed
};

namespace jgo::testing {
namespace {

XLA_FFI_Error* MakeError(XLA_FFI_Error_Code code, std::string message) {
  return new XLA_FFI_Error{code, std::move(message)};
}

XLA_FFI_Error* ErrorCreate(XLA_FFI_Error_Create_Args* args) {
  return MakeError(args->errc, args->message ? args->message : "");
}
void ErrorGetMessage(XLA_FFI_Error_GetMessage_Args* args) { args->message = args->error->message.c_str(); }
void ErrorDestroy(XLA_FFI_Error_Destroy_Args* args) { delete args->error; }

XLA_FFI_Error* StreamGet(XLA_FFI_Stream_Get_Args*) {
  return MakeError(XLA_FFI_Error_Code_UNIMPLEMENTED, "XLA_FFI_Stream_Get: no stream on the host");
}

// XLA's rule (XLA_FFI_DeviceMemory_Allocate): a power-of-two alignment of at most 16 bytes, else an error.
XLA_FFI_Error* ScratchAllocate(XLA_FFI_DeviceMemory_Allocate_Args* args) {
  if (args->alignment == 0 || (args->alignment & (args->alignment - 1)) != 0 || args->alignment > 16)
    return MakeError(XLA_FFI_Error_Code_INVALID_ARGUMENT,
                     "XLA_FFI_DeviceMemory_Allocate: unsupported alignment " + std::to_string(args->alignment));
  const size_t alignment = std::max(args->alignment, alignof(std::max_align_t));
  const size_t size = (std::max<size_t>(args->size, 1) + alignment - 1) / alignment * alignment;
  args->data = std::aligned_alloc(alignment, size);
  if (!args->data) return MakeError(XLA_FFI_Error_Code_RESOURCE_EXHAUSTED, "XLA_FFI_DeviceMemory_Allocate failed");
  ++args->ctx->live_scratch;
  return nullptr;
}

XLA_FFI_Error* ScratchFree(XLA_FFI_DeviceMemory_Free_Args* args) {
  std::free(args->data);
  --args->ctx->live_scratch;
  return nullptr;
}

XLA_FFI_Error* ThreadPoolSchedule(XLA_FFI_ThreadPool_Schedule_Args* args) {
  args->ctx->host->Schedule(args->task, args->data);
  return nullptr;
}

XLA_FFI_Error* ThreadPoolNumThreads(XLA_FFI_ThreadPool_NumThreads_Args* args) {
  *args->num_threads = args->ctx->host->num_threads();
  return nullptr;
}

// An entry the host does not implement: an error naming it.
XLA_FFI_Error* Unimplemented(const char* name) {
  return MakeError(XLA_FFI_Error_Code_UNIMPLEMENTED, std::string(name) + " is not implemented on the host");
}
#define JGO_UNIMPLEMENTED(NAME) [](NAME##_Args*) { return Unimplemented(#NAME); }

}  // namespace

HostFfi::HostFfi(int num_threads) {
  api_ = {};
  api_.struct_size = XLA_FFI_Api_STRUCT_SIZE;
  api_.api_version = {XLA_FFI_Api_Version_STRUCT_SIZE, nullptr, XLA_FFI_API_MAJOR, XLA_FFI_API_MINOR};
  api_.XLA_FFI_Error_Create = ErrorCreate;
  api_.XLA_FFI_Error_GetMessage = ErrorGetMessage;
  api_.XLA_FFI_Error_Destroy = ErrorDestroy;
  api_.XLA_FFI_Handler_Register = JGO_UNIMPLEMENTED(XLA_FFI_Handler_Register);
  api_.XLA_FFI_Stream_Get = StreamGet;
  api_.XLA_FFI_Type_Register = JGO_UNIMPLEMENTED(XLA_FFI_Type_Register);
  api_.XLA_FFI_ExecutionContext_Get = JGO_UNIMPLEMENTED(XLA_FFI_ExecutionContext_Get);
  api_.XLA_FFI_State_Set = JGO_UNIMPLEMENTED(XLA_FFI_State_Set);
  api_.XLA_FFI_State_Get = JGO_UNIMPLEMENTED(XLA_FFI_State_Get);
  api_.XLA_FFI_DeviceMemory_Allocate = ScratchAllocate;
  api_.XLA_FFI_DeviceMemory_Free = ScratchFree;
  api_.XLA_FFI_ThreadPool_Schedule = ThreadPoolSchedule;
  api_.XLA_FFI_ThreadPool_NumThreads = ThreadPoolNumThreads;
  api_.XLA_FFI_Future_Create = JGO_UNIMPLEMENTED(XLA_FFI_Future_Create);
  api_.XLA_FFI_Future_SetAvailable = JGO_UNIMPLEMENTED(XLA_FFI_Future_SetAvailable);
  api_.XLA_FFI_Future_SetError = JGO_UNIMPLEMENTED(XLA_FFI_Future_SetError);
  api_.XLA_FFI_RunId_Get = JGO_UNIMPLEMENTED(XLA_FFI_RunId_Get);
  api_.XLA_FFI_DeviceOrdinal_Get = JGO_UNIMPLEMENTED(XLA_FFI_DeviceOrdinal_Get);
  for (int t = 0; t < num_threads; ++t) threads_.emplace_back([this] { Work(); });
}

HostFfi::~HostFfi() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : threads_) t.join();
}

void HostFfi::Schedule(XLA_FFI_Task* task, void* data) {
  ++scheduled_;
  if (threads_.empty()) return task(data);
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.emplace_back(task, data);
  }
  wake_.notify_one();
}

// A pool thread: runs queued tasks until the pool stops and the queue is empty.
void HostFfi::Work() {
  for (;;) {
    std::pair<XLA_FFI_Task*, void*> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      job = queue_.front();
      queue_.pop_front();
    }
    job.first(job.second);
  }
}

namespace {

XLA_FFI_Buffer MakeBuffer(const BufferRef& b) {
  return {XLA_FFI_Buffer_STRUCT_SIZE, nullptr, b.dtype, b.data, static_cast<int64_t>(b.dims.size()),
          const_cast<int64_t*>(b.dims.data())};
}

}  // namespace

std::optional<std::string> HostFfi::Call(XLA_FFI_Handler* handler, const std::vector<BufferRef>& args,
                                         const std::vector<BufferRef>& rets, const std::vector<Attribute>& attrs) {
  std::vector<XLA_FFI_Buffer> arg_bufs, ret_bufs;
  for (const auto& b : args) arg_bufs.push_back(MakeBuffer(b));
  for (const auto& b : rets) ret_bufs.push_back(MakeBuffer(b));
  std::vector<XLA_FFI_ArgType> arg_types(args.size(), XLA_FFI_ArgType_BUFFER);
  std::vector<XLA_FFI_RetType> ret_types(rets.size(), XLA_FFI_RetType_BUFFER);
  std::vector<void*> arg_ptrs, ret_ptrs;
  for (auto& b : arg_bufs) arg_ptrs.push_back(&b);
  for (auto& b : ret_bufs) ret_ptrs.push_back(&b);

  // Handlers look attributes up in name order.
  std::vector<const Attribute*> sorted;
  for (const auto& a : attrs) sorted.push_back(&a);
  std::sort(sorted.begin(), sorted.end(), [](const Attribute* a, const Attribute* b) { return a->name < b->name; });
  const size_t n_attrs = sorted.size();
  std::vector<XLA_FFI_ByteSpan> names(n_attrs), strings(n_attrs);
  std::vector<XLA_FFI_Scalar> scalars(n_attrs);
  std::vector<XLA_FFI_Array> arrays(n_attrs);
  std::vector<XLA_FFI_ByteSpan*> name_ptrs(n_attrs);
  std::vector<XLA_FFI_AttrType> attr_types(n_attrs);
  std::vector<void*> attr_ptrs(n_attrs);
  for (size_t i = 0; i < n_attrs; ++i) {
    const Attribute& a = *sorted[i];
    void* bytes = const_cast<char*>(a.bytes.data());
    names[i] = {a.name.data(), a.name.size()};
    name_ptrs[i] = &names[i];
    attr_types[i] = a.kind;
    switch (a.kind) {
      case XLA_FFI_AttrType_SCALAR:
        scalars[i] = {a.dtype, bytes};
        attr_ptrs[i] = &scalars[i];
        break;
      case XLA_FFI_AttrType_ARRAY:
        arrays[i] = {a.dtype, ByteWidth(a.dtype) ? a.bytes.size() / ByteWidth(a.dtype) : 0, bytes};
        attr_ptrs[i] = &arrays[i];
        break;
      case XLA_FFI_AttrType_STRING:
        strings[i] = {a.bytes.data(), a.bytes.size()};
        attr_ptrs[i] = &strings[i];
        break;
      default:
        return "attribute " + a.name + " has a kind the host cannot pass";
    }
  }

  XLA_FFI_ExecutionContext ctx;
  ctx.host = this;
  XLA_FFI_CallFrame frame = {};
  frame.struct_size = XLA_FFI_CallFrame_STRUCT_SIZE;
  frame.api = &api_;
  frame.ctx = &ctx;
  frame.stage = XLA_FFI_ExecutionStage_EXECUTE;
  frame.args = {XLA_FFI_Args_STRUCT_SIZE, nullptr, static_cast<int64_t>(args.size()), arg_types.data(),
                arg_ptrs.data()};
  frame.rets = {XLA_FFI_Rets_STRUCT_SIZE, nullptr, static_cast<int64_t>(rets.size()), ret_types.data(),
                ret_ptrs.data()};
  frame.attrs = {XLA_FFI_Attrs_STRUCT_SIZE, nullptr, static_cast<int64_t>(n_attrs), attr_types.data(),
                 name_ptrs.data(), attr_ptrs.data()};

  XLA_FFI_Error* error = handler(&frame);
  std::optional<std::string> message;
  if (error) {
    message = error->message;
    delete error;
  }
  if (ctx.live_scratch != 0)
    message = message.value_or("") + " [" + std::to_string(ctx.live_scratch) + " scratch allocations not freed]";
  return message;
}

size_t ByteWidth(XLA_FFI_DataType dtype) {
  switch (dtype) {
    case XLA_FFI_DataType_PRED:
    case XLA_FFI_DataType_S8:
    case XLA_FFI_DataType_U8:
      return 1;
    case XLA_FFI_DataType_S16:
    case XLA_FFI_DataType_U16:
    case XLA_FFI_DataType_F16:
    case XLA_FFI_DataType_BF16:
      return 2;
    case XLA_FFI_DataType_S32:
    case XLA_FFI_DataType_U32:
    case XLA_FFI_DataType_F32:
      return 4;
    case XLA_FFI_DataType_S64:
    case XLA_FFI_DataType_U64:
    case XLA_FFI_DataType_F64:
    case XLA_FFI_DataType_C64:
      return 8;
    case XLA_FFI_DataType_C128:
      return 16;
    default:
      return 0;
  }
}

const char* DataTypeName(XLA_FFI_DataType dtype) {
  switch (dtype) {
    case XLA_FFI_DataType_PRED: return "pred";
    case XLA_FFI_DataType_S8: return "s8";
    case XLA_FFI_DataType_S16: return "s16";
    case XLA_FFI_DataType_S32: return "s32";
    case XLA_FFI_DataType_S64: return "s64";
    case XLA_FFI_DataType_U8: return "u8";
    case XLA_FFI_DataType_U16: return "u16";
    case XLA_FFI_DataType_U32: return "u32";
    case XLA_FFI_DataType_U64: return "u64";
    case XLA_FFI_DataType_F16: return "f16";
    case XLA_FFI_DataType_BF16: return "bf16";
    case XLA_FFI_DataType_F32: return "f32";
    case XLA_FFI_DataType_F64: return "f64";
    case XLA_FFI_DataType_C64: return "c64";
    case XLA_FFI_DataType_C128: return "c128";
    default: return "unsupported";
  }
}

}  // namespace jgo::testing
