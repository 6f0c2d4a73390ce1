// Translates the library's typed C++ errors into the Python exceptions of specgen.errors.
#include "common/error.h"
#include "python/bindings.h"

namespace nb = nanobind;

namespace specgen::python {

static void raise_as(const char* name, const char* what) {
    nb::object cls = nb::module_::import_("specgen.errors").attr(name);
    PyErr_SetString(cls.ptr(), what);
}

void bind_errors(nb::module_& m) {
    nb::register_exception_translator([](const std::exception_ptr& p, void*) {
        try {
            std::rethrow_exception(p);
        } catch (const model_load_error& e) {
            raise_as("ModelLoadError", e.what());
        } catch (const context_overflow_error& e) {
            raise_as("ContextOverflowError", e.what());
        } catch (const invalid_argument_error& e) {
            raise_as("InvalidParameterError", e.what());
        } catch (const not_implemented_error& e) {
            raise_as("SpecgenNotImplementedError", e.what());
        } catch (const device_error& e) {
            raise_as("DeviceError", e.what());
        } catch (const queue_full_error& e) {
            raise_as("QueueFullError", e.what());
        } catch (const cancelled_error& e) {
            raise_as("GenerationCancelled", e.what());
        } catch (const error& e) {
            raise_as("SpecgenError", e.what());
        }
    });
}

}  // namespace specgen::python
